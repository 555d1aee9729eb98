// Per-request records (requests.csv) and the metrics computed from them: the course's report
// (success count, window, output throughput, TTFT percentiles by nearest rank or linear) plus TPOT, ITL, E2E,
// request throughput and goodput under SLOs, as text and as JSON.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/util/stats.h"

namespace inferlab::lab {

// What the server said about one request (docs/measurement.md): inferlab's or llama.cpp's
// `timings` object, and usage.prompt_tokens_details.cached_tokens from any server. Each field is
// absent when the server did not send it.
struct ServerTimings {
  std::optional<double> queue_ms, prefill_ms, decode_ms, ttft_ms;
  std::optional<int64_t> cached_tokens, preemptions;
  // Fields `later` has replace ours (a stream's usage chunk after its finish chunk).
  void merge(const ServerTimings& later);
};

struct RequestRecord {
  std::string request_id;
  std::string status;  // "ok", "timeout", "error", "http_<code>"
  double start_ms = 0;  // relative to the run start
  double end_ms = 0;
  std::optional<int64_t> input_tokens;
  std::optional<int64_t> output_tokens;
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;  // when absent, derived as (e2e - ttft) / (output_tokens - 1)
  std::vector<double> itl_ms;     // gaps between consecutive content chunks
  bool has_itl = false;           // the record carries an itl_ms field (possibly empty)
  std::string error;
  std::size_t line = 0;           // where it came from in a CSV, for messages
  ServerTimings server;           // the server_* and cached_tokens, preemptions columns
  std::optional<int64_t> run;     // which of `bench serve --repeat K` runs (1..K); the optional run column
  std::string conversation_id;    // a multi-turn dataset's conversation ("c01"); empty for single requests
  std::optional<int64_t> turn;    // ... and the turn within it (1, 2, ...)
};

// The columns written, the course's seven first; then conversation_id and turn only when some record
// is a conversation's turn, and run only when some record has one.
extern const std::vector<std::string> kRequestColumns;

// Reads requests.csv: request_id, status, start_ms, end_ms and output_tokens are required columns;
// input_tokens, ttft_ms, tpot_ms, itl_ms, error and the server's figures (server_queue_ms,
// server_prefill_ms, server_decode_ms, server_ttft_ms, cached_tokens, preemptions, conversation_id,
// turn, run) are optional; other columns are ignored. Throws
// Error naming the line of a malformed row.
std::vector<RequestRecord> read_requests_csv(const std::filesystem::path& path);
std::vector<RequestRecord> parse_requests_csv(const std::string& text, const std::string& source);
std::string requests_csv(const std::vector<RequestRecord>& records);
void write_requests_csv(const std::filesystem::path& path, const std::vector<RequestRecord>& records);

// Service-level objectives for goodput: a successful request meets them when every one given holds.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2e_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2e_ms; }
};
// "ttft_ms=200,tpot_ms=50" (also e2e_ms); throws Error on an unknown key or a bad number.
Slo parse_slo(const std::string& text);

// Statistics of one metric over the successful requests.
struct Distribution {
  std::size_t n = 0;
  double mean = 0, min = 0, max = 0;
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0;  // by nearest rank (the course's) or linear (numpy's)
};
Distribution distribution(std::vector<double> values, PercentileMethod method = PercentileMethod::NearestRank);

// TPOT of one successful request: its tpot_ms, else (e2e - ttft) / (output_tokens - 1) (then
// *derived is set); none for a one-token reply without tpot_ms.
std::optional<double> request_tpot(const RequestRecord& r, bool* derived);

// One turn index of multi-turn conversations (every conversation's turn k): what its requests'
// prompts were and how much of them the server's prefix cache held.
struct TurnSummary {
  int64_t turn = 0;
  std::size_t requests = 0, successful = 0;
  Distribution ttft;
  double mean_input_tokens = 0;  // over successful requests that have input_tokens
  std::size_t cache_reported = 0;
  int64_t cached_tokens = 0, cache_reported_input = 0;
};

struct Summary {
  std::size_t requests = 0, successful = 0;
  std::map<std::string, std::size_t> failures;  // status -> count, every status but "ok"
  double window_s = 0;
  int64_t output_tokens = 0;  // over successful requests
  int64_t input_tokens = 0;
  double output_throughput = 0;   // token/s
  double request_throughput = 0;  // successful req/s
  Distribution ttft, tpot, itl, e2e;
  // TTFT split from the server's figures: its queue and prefill, and the transport (client TTFT
  // minus server TTFT) of requests that have both.
  Distribution server_queue, server_prefill, transport;
  bool has_ttft_split() const { return server_queue.n || server_prefill.n || transport.n; }
  std::size_t cache_reported = 0;     // successful requests that said how many tokens were cached
  int64_t cached_tokens = 0;          // ... their prompt tokens from a prefix cache
  int64_t cache_reported_input = 0;   // ... their prompt tokens in all
  std::size_t conversations = 0;  // distinct conversation_id values (multi-turn runs)
  std::vector<TurnSummary> turns; // by turn index, when the records are conversations' turns
  bool tpot_derived = false;  // some TPOT came from (e2e - ttft) / (output_tokens - 1)
  bool itl_recorded = false;  // the input carried ITL data
  PercentileMethod percentiles = PercentileMethod::NearestRank;
  Slo slo;
  std::size_t slo_met = 0;
  double goodput = 0;  // req/s meeting the SLO
};

// Throws Error("No requests recorded.") on no rows and Error("The measurement window must be
// positive.") when max(end_ms) - min(start_ms) <= 0 — the course's messages.
Summary summarize(const std::vector<RequestRecord>& records, const Slo& slo = {},
                  PercentileMethod percentiles = PercentileMethod::NearestRank);
std::string format_report(const Summary& summary);
nlohmann::json summary_json(const Summary& summary);

}  // namespace inferlab::lab
