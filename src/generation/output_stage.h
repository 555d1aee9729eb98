// Where tokens become the request's answer, as vLLM's output processor does: each sampled token
// is checked against the grammar (or its trigger) and the stop rules (stop ids, grammar complete,
// max_tokens, the context), streamed to the RequestStream and timed; a sequence that ended gets
// its last event with its timings, gives its KV blocks back and is counted in SchedulerStats.
// Engine thread only; the stats it writes are read by other threads under `stats_mutex`.
#pragma once
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generation/kv_prefix_manager.h"
#include "generation/model_runner.h"
#include "generation/planner.h"
#include "generation/sequence.h"
#include "inferlab/generation/scheduler_stats.h"

namespace inferlab {

class OutputStage {
 public:
  // stats is guarded by stats_mutex (the scheduler's lock, which also guards its request queue).
  OutputStage(std::size_t context, KVPrefixManager& kv, std::mutex& stats_mutex, SchedulerStats& stats);

  // The admitted sequences' first scheduling time and, on first admission, their cached prompt
  // tokens.
  void admitted(const std::vector<Admission>& admissions);
  // Ends a sequence the client stopped or cancelled, or whose deadline passed; false otherwise.
  bool end_if_left(Sequence& seq, Clock::time_point now);
  // The sequence's last event: its KV blocks released, its finish counted and streamed.
  void finish(Sequence& seq, FinishReason reason, const std::string& error = "", bool request_error = false,
              std::vector<float> embedding = {});

  // One step, in plan order: begin_step(), then per chunk count_prefill() (plain chunks, before
  // sampling) and take() (what the runner sampled), then end_step().
  void begin_step(Clock::time_point now);
  void count_prefill(const PlannedChunk& chunk);
  void take(Sequence& seq, SampledChunk sampled);
  // An embedding sequence's answer: it ends with it (reason stop) in end_step().
  void embedded(Sequence& seq, std::vector<float> embedding);
  // Counts the step in the stats and finishes the sequences that ended in it (stop, then length,
  // then error); returns them, for the planner to drop from its batch.
  std::vector<Sequence*> end_step(const StepPlan& plan);

 private:
  struct Failed {
    Sequence* seq;
    std::string message;
    bool request_error = false;  // the request's grammar, not the server
  };
  // One generated token of seq: counted, timed, checked against the grammar and the stop rules,
  // streamed. False when the sequence is done (its last event follows in end_step()).
  bool emit(Sequence& seq, SampledToken sampled);
  std::optional<std::string> advance_grammar(Sequence& seq, int32_t token, bool& done);
  std::optional<std::string> advance_grammar_text(Sequence& seq, std::string_view bytes, bool& done);
  void harmony_header(Sequence& seq, int32_t token, std::string_view bytes);
  static RequestTimings timings_of(Sequence& seq, Clock::time_point end);

  std::size_t context_;
  KVPrefixManager& kv_;
  std::mutex& stats_mutex_;
  SchedulerStats& stats_;

  // The current step's record.
  Clock::time_point now_;
  uint64_t prefill_tokens_ = 0, new_tokens_ = 0, drafted_ = 0, accepted_ = 0;
  std::vector<double> itls_, ttfts_;
  std::vector<Sequence*> done_length_, done_stop_;
  std::vector<std::pair<Sequence*, std::vector<float>>> done_embedded_;
  std::vector<Failed> done_error_;
};

}  // namespace inferlab
