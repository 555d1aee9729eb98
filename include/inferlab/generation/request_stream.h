// The answer to one request as the engine produces it: a stream of events (each sampled token,
// then one finish with its reason and timings) that the engine thread pushes and one HTTP worker
// pulls; and the typed refusal of a full queue.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/sampler.h"
#include "inferlab/util/error.h"

namespace inferlab {

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
  std::vector<float> embedding;           // an embedding request's answer, with its last event (reason stop)
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
  // The engine side: the scheduler wires the wake-up and the output stage pushes events and
  // records the cached prompt tokens at admission.
  friend class Scheduler;
  friend class OutputStage;
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

}  // namespace inferlab
