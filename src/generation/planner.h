// The scheduler's plan for one step, as vLLM's v1 scheduler makes it: which waiting sequences are
// admitted (first come, first served, while KV blocks allow), which running ones are preempted
// when the pool runs dry (the newest arrival), and which tokens each planned sequence feeds the
// model (decode first, one token each plus any speculative draft, then prompt chunks within the
// step's token budget; an embedding's input whole, never split). It owns the waiting queue and the running batch; it reserves KV blocks
// through the KVPrefixManager but computes, samples and streams nothing. Engine thread only.
#pragma once
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "generation/kv_prefix_manager.h"
#include "generation/sequence.h"
#include "inferlab/generation/speculative_decoding.h"

namespace inferlab {

struct PlannerOptions {
  int max_batch = 32;           // sequences running at once
  int step_token_budget = 512;  // prompt (and draft) tokens per step beyond one decode token each
  SpeculativeOptions speculative;
  std::size_t context = 0;      // the model's context in tokens; 0: unbounded
};

// One sequence's share of a step: `count` tokens from its first uncomputed one; with a draft,
// its last token then the draft (count = 1 + draft size), one logits row per position to verify.
struct PlannedChunk {
  Sequence* seq;
  int count;
  std::vector<int32_t> draft;
};

struct StepPlan {
  std::vector<PlannedChunk> chunks;  // decoding sequences first, then prompt chunks
  int decoding = 0;                  // sequences decoding (one token each, maybe drafted)
  int preemptions = 0;               // running sequences sent back to the queue to make room
};

// A waiting sequence moved into the running batch, with the prompt tokens the prefix cache gave it.
struct Admission {
  Sequence* seq;
  int cached_tokens;
};

class Planner {
 public:
  Planner(PlannerOptions options, KVPrefixManager& kv);

  // Moves waiting sequences, in order, into the running batch while there is a slot and the
  // blocks for their uncomputed tokens (reusing cached prefix blocks, evicting other cached ones;
  // with others running, a watermark of blocks stays free so they can grow). Stops at the first
  // that does not fit: it waits.
  std::vector<Admission> admit();
  // Reserves one more position for every decoding sequence (evicting cached blocks, then
  // preempting the newest arrival while the pool is dry) and plans the step's chunks.
  StepPlan plan();

  std::deque<std::unique_ptr<Sequence>>& waiting() { return waiting_; }
  std::vector<std::unique_ptr<Sequence>>& running() { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }

 private:
  Sequence* preempt_newest();  // back to the front of the queue; returns it

  PlannerOptions options_;
  KVPrefixManager& kv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
};

}  // namespace inferlab
