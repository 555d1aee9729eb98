// `inferlab bench serve`: an asynchronous load generator. One thread drives every request through
// the bench's stream pool (an event loop over non-blocking sockets), so thousands of concurrent
// streams cost file descriptors, not threads. Every received chunk is stamped with the steady
// clock as it arrives.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "inferlab/lab/metrics.h"

namespace inferlab::lab {

class TextTokenizer;

struct BenchPrompt {
  std::string text;
  std::optional<int64_t> input_tokens;  // known when a tokenizer made or measured it
  int output_len = 0;                   // max_tokens
  // A user turn of a multi-turn conversation (conversation 0, 1, ...; turn 1, 2, ...). The turns of
  // one conversation are consecutive prompts, in order; each is sent only after the answer to the
  // one before, with the whole history (the answers as they were received). Absent: a single request.
  std::optional<int> conversation;
  int turn = 0;
};

// One exchange of a conversation so far: the user's turn and the answer the server gave to it.
struct ChatExchange {
  std::string user, assistant;
};

// Where prompts come from: the datasets (inferlab/lab/datasets.h).

// Start offsets (seconds from the run start) of a Poisson process of `rate` requests/s whose
// gaps follow a gamma distribution of shape `burstiness` and mean 1/rate (vLLM's
// benchmark_serving: 1 = Poisson, < 1 burstier, > 1 more regular). rate <= 0: all at 0.
std::vector<double> arrival_offsets(int count, double rate, double burstiness, uint64_t seed);

struct ServeOptions {
  std::string base_url;
  std::string model;  // sent as "model"
  std::string endpoint = "chat";  // "chat" -> /chat/completions, "completions" -> /completions
  std::string api_key;
  int concurrency = 0;      // most requests (multi-turn: conversations) in flight; 0: no limit
  double request_rate = 0;  // requests (multi-turn: conversations started) per s; 0: all at once
  double burstiness = 1.0;
  bool ignore_eos = false;
  double timeout_s = 600;   // per request, connection included
  double temperature = 0;
  uint64_t seed = 0;
  bool progress = false;    // a progress bar on stderr
  std::shared_ptr<const TextTokenizer> tokenizer;  // counts output tokens when the server sends no usage
};

struct ServeRun {
  std::vector<RequestRecord> records;  // in request order
  double duration_s = 0;
  // How output_tokens were counted: "usage" (server), "tokenizer", "content chunks" — or a mix.
  std::string output_tokens_source;
  int max_in_flight = 0;
  std::string interrupted_by;  // "SIGINT" / "SIGTERM" when the run was cut short (its records are partial)
  std::chrono::steady_clock::time_point started;  // the origin of the records' start_ms / end_ms
};

ServeRun run_serve_benchmark(const ServeOptions& options, const std::vector<BenchPrompt>& prompts);

// The request body one prompt becomes (exposed for tests); a later turn of a conversation carries
// the exchanges before it as user / assistant messages.
std::string request_body(const ServeOptions& options, const BenchPrompt& prompt,
                         const std::vector<ChatExchange>& history = {});

}  // namespace inferlab::lab
