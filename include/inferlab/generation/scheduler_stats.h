// What the scheduler tells a live view (the dashboard, /metrics): its counters and histograms, and
// one row per sequence of the running batch.
#pragma once
#include <cstdint>
#include <optional>

#include "inferlab/generation/generation_request.h"
#include "inferlab/util/stats.h"

namespace inferlab {

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
  uint64_t embedding_requests = 0;     // embedding requests answered
  uint64_t embedding_tokens = 0;       // ... and their input tokens
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

}  // namespace inferlab
