// Continuous batching: one engine thread owns the model and the paged KV cache. Every step it
// admits waiting requests while KV blocks allow, runs one Model::forward over the prompt chunks of
// new sequences and the next token of every running one, samples, streams tokens to each
// request's RequestStream and drops the finished. Shared prompt prefixes reuse full KV blocks.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inferlab/generation/generation_request.h"
#include "inferlab/generation/request_stream.h"
#include "inferlab/generation/scheduler_stats.h"
#include "inferlab/generation/speculative_decoding.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"

namespace inferlab {

// The parts of the engine's step (src/generation): one sequence, block and prefix-cache
// bookkeeping, the plan, the model pass and sampling, the output.
struct Sequence;
class KVPrefixManager;
class Planner;
class ModelRunner;
class OutputStage;

struct SchedulerOptions {
  int max_batch = 32;              // sequences running at once
  std::size_t kv_tokens = 0;       // KV cache capacity in tokens; 0: default_kv_tokens()
  int block_size = 16;             // KV positions per block (also the prefix-caching granularity)
  KVType kv_type = KVType::F32;    // the cache's elements
  int step_token_budget = 512;     // prompt tokens per step beyond decode (chunked prefill)
  int max_waiting = 1024;          // queued requests beyond this are refused (OverloadedError)
  bool prefix_caching = true;
  SpeculativeOptions speculative;  // prompt-lookup drafts for unconstrained decoding sequences
};

// The KV capacity used when none is given: enough for max_batch full contexts, capped near 1 GiB
// (but always at least one full context); f16 elements fit twice the tokens in that budget.
std::size_t default_kv_tokens(const ModelConfig& config, int max_batch, KVType type = KVType::F32);

class Scheduler {
 public:
  Scheduler(Model& model, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws Error when it could never fit (prompt + max_tokens beyond the KV
  // cache or the context), OverloadedError when the queue is full or the scheduler stopped.
  std::shared_ptr<RequestStream> submit(GenerationRequest request);
  // Queues an embedding: its stream ends with one event carrying the embedding (or an error).
  // Throws Error when the input could never run (empty, ids outside the vocabulary, longer than
  // the context, the KV cache or what one step may hold), OverloadedError as above.
  std::shared_ptr<RequestStream> submit(EmbeddingRequest request);

  // Ends every queued and running request with a FinishReason::error event carrying `reason`,
  // then stops the engine thread. Later submits are refused.
  void shutdown(const std::string& reason);

  // Runs task(model) on the engine thread between two steps and waits for it: work on the model
  // beside the scheduled requests (the Python package's step-by-step forward pass) with the one
  // copy of the weights, never during a step. The task's exception is rethrown here; Error when
  // the scheduler has stopped.
  void run_on_model(const std::function<void(Model&)>& task);

  bool idle() const;  // nothing queued or running
  // Seconds since the engine loop last made progress: began an iteration (after waking for work)
  // or finished a step. A loop stuck in one step counts up; an idle loop wakes every 50 ms.
  double seconds_since_progress() const;
  SchedulerStats stats() const;
  std::vector<SequenceSnapshot> running_sequences() const;  // in order of arrival
  std::size_t capacity_tokens() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  void engine_loop();
  void mark_progress();
  bool step();  // false when there was nothing to do
  std::shared_ptr<RequestStream> enqueue(std::unique_ptr<Sequence> seq);  // submit()'s common part
  void drop_cancelled_and_expired();
  void publish_stats();

  struct ModelTask {  // run_on_model's task and its caller's wait
    std::function<void(Model&)> run;
    std::promise<void> done;
  };

  Model& model_;
  SchedulerOptions options_;
  KVCache cache_;

  mutable std::mutex mutex_;  // guards incoming_, model_tasks_, stopping_, stats_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  std::deque<std::shared_ptr<ModelTask>> model_tasks_;
  bool stopping_ = false;
  std::string stop_reason_;
  std::atomic<bool> has_work_{false};
  std::atomic<Clock::rep> progress_ticks_{0};  // Clock time of the loop's last progress
  SchedulerStats stats_;
  std::vector<SequenceSnapshot> running_snapshot_;

  // The parts of a step (src/generation; docs/architecture.md), engine thread only.
  std::unique_ptr<KVPrefixManager> kv_;
  std::unique_ptr<Planner> planner_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<OutputStage> output_;
  uint64_t next_arrival_ = 0;
  std::thread engine_;  // last: started once every part above exists
};

}  // namespace inferlab
