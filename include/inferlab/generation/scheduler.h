// Continuous batching: one engine thread owns the model and the paged KV cache. Every step it
// admits waiting requests while KV blocks allow, runs one Model::forward over the prompt chunks of
// new sequences and the next token of every running one, samples, streams tokens to each
// request's RequestStream and drops the finished. Shared prompt prefixes reuse full KV blocks.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"
#include "inferlab/generation/sampler.h"
#include "inferlab/generation/speculative_decoding.h"
#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/util/stats.h"

namespace inferlab {

using Clock = std::chrono::steady_clock;

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

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // finish with reason stop (the model's EOS unless ignore_eos)
  std::optional<Clock::time_point> deadline;  // finish with reason timeout after this
  // Constrained decoding: every token is drawn from those that keep the output a valid prefix of
  // the grammar; the stop tokens only where it is complete; reason stop once nothing may follow.
  std::shared_ptr<CompiledGrammar> grammar;
  // With a trigger, the output is free until it contains this text; the grammar then constrains
  // what follows it (tool_choice auto with strict tools: the call after "<tool_call>").
  std::string grammar_trigger;
};

enum class FinishReason { stop, length, cancelled, timeout, error };
const char* to_string(FinishReason reason);

// Where one sequence spent its time, from the engine's side (docs/measurement.md). Stages are
// measured on the monotonic clock from arrival (submit): queue until first admitted to the batch,
// prefill until the first token, decode until the finish, so queue + prefill + decode is the
// whole server-side latency. A preemption's recompute counts in the stage it interrupts.
struct RequestTimings {
  int64_t arrival_unix_ms = 0;  // the system clock at arrival
  double queue_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  int prompt_tokens = 0;     // the prompt's length
  int cached_tokens = 0;     // prompt tokens reused from the prefix cache (not computed)
  int generated_tokens = 0;
  int preemptions = 0;
  int draft_tokens = 0;           // speculative decoding: tokens proposed for this request
  int accepted_draft_tokens = 0;  // ... and kept (each saves one forward step)
  std::vector<double> token_ms;  // when each generated token was produced, ms after arrival

  double ttft_ms() const { return queue_ms + prefill_ms; }
  double e2e_ms() const { return queue_ms + prefill_ms + decode_ms; }
};

struct StreamEvent {
  std::optional<SampledToken> token;
  std::optional<FinishReason> finish;  // the last event of a stream
  std::string error;                   // with FinishReason::error / timeout
  bool request_error = false;          // error: caused by what the request asked for (a grammar too
                                       // ambiguous to follow), not by the server: HTTP 400
  std::optional<RequestTimings> timings;  // with the last event
};

// Queue full: the caller should answer 503 with Retry-After.
class OverloadedError : public Error {
 public:
  using Error::Error;
};

// The engine thread pushes, one HTTP worker pulls.
class RequestStream {
 public:
  // Up to `timeout` for at least one event; returns them all (empty on timeout).
  std::vector<StreamEvent> wait(std::chrono::milliseconds timeout);
  // The client went away: the engine frees the sequence's slot and KV blocks before its next
  // step and counts it as cancelled.
  void cancel();
  bool cancelled() const { return cancelled_.load(); }
  // Called on the engine's thread after each event from now on is queued: how an event loop learns
  // there is something to send without a thread of its own waiting in wait(). Keep it short.
  void on_event(std::function<void()> notify);
  // The client has what it needs (a stop string matched in the text): freed like cancel(), but
  // counted as finished with reason stop. Wins over a later cancel() (the answer went out whole).
  void stop();
  bool stopped() const { return stopped_.load(); }
  int cached_prompt_tokens() const { return cached_prompt_tokens_.load(); }

 private:
  friend class Scheduler;
  void push(StreamEvent event);
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<int> cached_prompt_tokens_{0};
  std::function<void()> wake_engine_;
  std::function<void()> notify_;  // guarded by mutex_
};

struct SchedulerStats {
  int waiting = 0;
  int running = 0;
  int kv_blocks_total = 0;
  int kv_blocks_in_use = 0;  // held by queued or running sequences
  int kv_blocks_cached = 0;  // held only by the prefix cache (reusable, evicted when needed)
  int block_size = 0;
  uint64_t requests_submitted = 0;
  uint64_t requests_rejected = 0;
  uint64_t requests_finished[5] = {};  // by FinishReason
  uint64_t prompt_tokens = 0;          // submitted prompt tokens
  uint64_t prefill_tokens = 0;         // prompt tokens actually computed
  uint64_t prefix_cache_hit_tokens = 0;
  uint64_t generation_tokens = 0;
  uint64_t draft_tokens = 0;           // speculative decoding: proposed
  uint64_t accepted_draft_tokens = 0;  // ... and kept
  uint64_t steps = 0;
  uint64_t decode_steps = 0;          // steps that decoded at least one sequence
  uint64_t batched_decode_steps = 0;  // ... and more than one
  uint64_t preemptions = 0;
  Histogram decode_batch_size{{1, 2, 4, 8, 16, 32, 64, 128, 256}};
  // vLLM's bucket layouts, so its dashboards port. Stage histograms count requests that finished
  // with stop or length.
  Histogram time_to_first_token{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5,
                                 7.5, 10, 20, 40, 80, 160, 640, 2560}};
  Histogram inter_token_latency{{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5,
                                 10, 20, 40, 80}};
  Histogram e2e_latency = request_latency_histogram();
  Histogram queue_time = request_latency_histogram();
  Histogram prefill_time = request_latency_histogram();
  Histogram decode_time = request_latency_histogram();

  static Histogram request_latency_histogram() {
    return Histogram{{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}};
  }
};

// One sequence of the running batch as the engine thread last published it (each step): what a
// live view shows per request. Times are on the monotonic clock; `first_token` is unset while the
// prompt is still being computed.
struct SequenceSnapshot {
  uint64_t id = 0;  // the scheduler's arrival number (0, 1, ...)
  int prompt_tokens = 0;
  int cached_tokens = 0;      // prompt tokens reused from the prefix cache
  int computed_tokens = 0;    // positions whose K/V are in the cache (prompt progress, then decode)
  int generated_tokens = 0;
  int max_tokens = 0;
  int kv_blocks = 0;
  int preemptions = 0;
  Clock::time_point arrival;
  std::optional<Clock::time_point> scheduled, first_token;
};

class Scheduler {
 public:
  Scheduler(Model& model, SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws Error when it could never fit (prompt + max_tokens beyond the KV
  // cache or the context), OverloadedError when the queue is full or the scheduler stopped.
  std::shared_ptr<RequestStream> submit(GenerationRequest request);

  // Ends every queued and running request with a FinishReason::error event carrying `reason`,
  // then stops the engine thread. Later submits are refused.
  void shutdown(const std::string& reason);

  bool idle() const;  // nothing queued or running
  // Seconds since the engine loop last made progress: began an iteration (after waking for work)
  // or finished a step. A loop stuck in one step counts up; an idle loop wakes every 50 ms.
  double seconds_since_progress() const;
  SchedulerStats stats() const;
  std::vector<SequenceSnapshot> running_sequences() const;  // in order of arrival
  std::size_t capacity_tokens() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct Sequence;
  struct CachedBlock {
    int block;
    uint64_t parent;
    std::vector<int32_t> tokens;
    uint64_t last_used;
  };

  void engine_loop();
  void mark_progress();
  bool step();  // false when there was nothing to do
  void drop_cancelled_and_expired();
  void admit();
  bool make_room(int blocks);  // evict prefix-cache-only blocks until `blocks` are free
  Sequence* preempt_newest();  // back to the front of the queue; returns it
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "", bool request_error = false);
  static RequestTimings timings_of(Sequence& seq, Clock::time_point end);
  void match_prefix(Sequence& seq);
  void register_full_blocks(Sequence& seq);
  void publish_stats();

  Model& model_;
  SchedulerOptions options_;
  KVCache cache_;
  std::vector<float> logits_;  // the engine thread's, reused by every step
  std::thread engine_;

  mutable std::mutex mutex_;  // guards incoming_, stopping_, stats_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> incoming_;
  bool stopping_ = false;
  std::string stop_reason_;
  std::atomic<bool> has_work_{false};
  std::atomic<Clock::rep> progress_ticks_{0};  // Clock time of the loop's last progress
  SchedulerStats stats_;
  std::vector<SequenceSnapshot> running_snapshot_;

  // Engine thread only.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::unordered_map<uint64_t, CachedBlock> prefix_cache_;
  uint64_t clock_ = 0;  // LRU stamp for the prefix cache
  uint64_t next_arrival_ = 0;
};

}  // namespace inferlab
