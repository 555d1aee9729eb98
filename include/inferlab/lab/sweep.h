// `inferlab bench sweep`: server flags x load (vLLM's `bench sweep serve` with its plot_pareto).
// Each point is one start of `inferlab serve MODEL` on 127.0.0.1 with a free port and the point's
// flags, waiting for /health, then one `inferlab bench serve` at the point's concurrency (or rate),
// then the server stopped; every point's requests.csv, series, summary and logs in a folder of its
// own under the output directory, and sweep.json with every point's figures and the Pareto
// frontier of throughput against throughput per user (docs/measurement.md, "Sweeps").
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab::lab {

struct SweepServeVariant {
  std::string name;               // the point folder's part, e.g. "max-batch-4"; "default" for no flags
  std::vector<std::string> args;  // appended to `inferlab serve MODEL --host 127.0.0.1 --port P`
};
struct SweepLoad {
  std::string kind;  // "concurrency" or "request_rate"
  double value = 0;
};

struct SweepOptions {
  std::string cli;    // the inferlab executable the points run
  std::string model;  // served by every point
  std::vector<SweepServeVariant> serve;
  std::vector<SweepLoad> loads;
  std::vector<std::string> bench_args;  // given to every point's bench serve
  std::filesystem::path output_dir;
  double ready_timeout_s = 300;
  bool dry_run = false;  // print the commands, run nothing
};

// A shell-like split ("--max-batch 4 --served-model-name 'a b'"): blanks separate, '...' and "..."
// quote, backslash escapes. Throws Error naming `flag` on an unterminated quote.
std::vector<std::string> split_args(const std::string& text, const char* flag);
// vLLM's --serve-params file: a list of objects, or an object of name -> object; each key a flag
// ("max_batch": 4 -> --max-batch 4; true -> --flag; false -> --no-flag), "_benchmark_name" the name.
std::vector<SweepServeVariant> read_serve_params(const std::filesystem::path& path);
// A variant's name from its flags: "--max-batch 4" -> "max-batch-4"; none -> "default".
std::string variant_name(const std::vector<std::string>& args);
// Refuses flags the sweep sets itself, naming them (--host, --port in serve flags; --base-url,
// --output, --summary, --html, --concurrency, --request-rate in bench flags).
void check_sweep_args(const SweepOptions& options);

// Which points lie on the Pareto frontier of (x, y), both higher-is-better: a point is on it when no
// other point is at least as high on both and higher on one.
std::vector<bool> pareto_frontier(const std::vector<std::pair<double, double>>& points);

// Runs every point (serve variant x load, in that order) and returns sweep.json's content: the
// options, and per point its flags, load, folder, the bench serve figures (output and request
// throughput, tokens/s per user, TTFT / TPOT / ITL / E2E p50 and p95, successful and failed
// requests), `pareto` and, for a point that could not be measured, `error`. `log` gets a line as
// each point starts and ends.
nlohmann::json run_sweep(const SweepOptions& options, const std::function<void(const std::string&)>& log);
// The text table of sweep.json.
std::string format_sweep(const nlohmann::json& sweep);
// Throughput (y) against throughput per user (x), every point, the frontier joined and marked.
std::string pareto_svg(const nlohmann::json& sweep, const std::string& title);

}  // namespace inferlab::lab
