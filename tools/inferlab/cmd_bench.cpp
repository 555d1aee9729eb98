// Measurement commands: report (requests.csv -> metrics), bench serve (load generator),
// bench latency (the course's latency-vs-input-length experiment), chat (the course's stream client).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "command.h"
#include "inferlab/bench/lab_tokenizer.h"
#include "inferlab/bench/latency.h"
#include "inferlab/lab/capacity.h"
#include "inferlab/lab/compare.h"
#include "inferlab/lab/datasets.h"
#include "inferlab/lab/environment.h"
#include "inferlab/lab/html_report.h"
#include "inferlab/lab/load_generator.h"
#include "inferlab/lab/metrics.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/repeat.h"
#include "inferlab/lab/replica_metrics.h"
#include "inferlab/lab/series_recorder.h"
#include "inferlab/lab/server_series.h"
#include "inferlab/util/error.h"
#include "inferlab/model/model.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab::cli {
namespace {

using namespace inferlab::bench;  // in-process: the latency experiment
using namespace inferlab::lab;    // over HTTP: load generator, report, capacity

// The course's SystemExit messages go to stderr as they are, with exit status 1.
[[noreturn]] void exit_with(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  throw CLI::RuntimeError(1);
}

Summary summarize_or_exit(const std::vector<RequestRecord>& records, const Slo& slo, PercentileMethod percentiles) {
  try {
    return summarize(records, slo, percentiles);
  } catch (const Error& e) {
    exit_with(e.what());
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) fail("cannot write {}", path);
}

// --percentiles, shared by report and bench serve: nearest rank stays the default (the course's).
CLI::Option* add_percentiles_option(CLI::App* cmd, std::string& method) {
  return cmd->add_option("--percentiles", method,
                         "nearest-rank (default, the course's sorted[ceil(p*n)-1]) or linear (numpy's default, as vLLM)")
      ->default_val("nearest-rank");
}

// Fails now, before any load is sent, when `path` cannot be written at the end of the run
// (a missing folder, a directory, no permission): a run's measurements must not be lost to a typo.
void require_writable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (existed && std::filesystem::is_directory(path, ec)) fail("{} {}: is a directory", flag, path);
  {
    std::ofstream probe(path, std::ios::binary | std::ios::app);  // append: an existing file is left as it is
    if (!probe) fail("{} {}: cannot be written ({})", flag, path, std::strerror(errno));
  }
  if (!existed) std::filesystem::remove(path, ec);
}

// --compare's inputs: a file whose first non-blank character is '{' is a summary JSON (parsed, or
// an error naming it); anything else is left to the CSV reader.
std::optional<nlohmann::json> summary_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--compare: cannot open {}", path);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  if (!in || c != '{') return std::nullopt;
  in.seekg(0);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail("--compare: {} starts like JSON but is not valid JSON", path);
  return j;
}

void add_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Metrics of a requests.csv: success, window, throughput, TTFT/TPOT/ITL/E2E "
                                           "percentiles, goodput under --slo; or --compare A.csv B.csv");
  struct Args {
    std::string csv, slo, percentiles, html, series;
    std::vector<std::string> compare;
    bool json = false;
    CompareOptions compare_options;
  };
  auto a = std::make_shared<Args>();
  auto* csv = cmd->add_option(
      "csv", a->csv, "requests.csv (request_id,status,start_ms,end_ms,input_tokens,output_tokens,ttft_ms[,...])");
  auto* compare = cmd->add_option("--compare", a->compare,
                                  "A B: two requests.csv (per metric the median difference B - A over requests, and "
                                  "the output throughput) or two bench serve --repeat summaries (over runs), with a "
                                  "bootstrap CI and a verdict (faster, slower, no significant difference)")
                      ->expected(2)
                      ->excludes(csv);
  cmd->add_flag("--json", a->json, "print the metrics (or the comparison) as JSON");
  cmd->add_option("--html", a->html,
                  "also write the report as one self-contained HTML page (CDFs, ITL histogram, tokens/s over time, "
                  "per-request timeline, the numbers)")
      ->excludes(compare);
  cmd->add_option("--slo", a->slo, "service-level objectives for goodput, e.g. ttft_ms=200,tpot_ms=50 (also e2e_ms)")
      ->excludes(compare);
  add_percentiles_option(cmd, a->percentiles)->excludes(compare);
  cmd->add_option("--series", a->series,
                  "the run's server and machine series (bench serve's NAME.series.csv; default: the one beside the "
                  "CSV when there is one): summarised in the report and drawn by --html")
      ->excludes(compare);
  cmd->add_option("--seed", a->compare_options.seed, "--compare: seed of the bootstrap")->needs(compare);
  cmd->add_option("--resamples", a->compare_options.resamples, "--compare: bootstrap resamples (default 2000)")
      ->check(CLI::Range(100, 1000000))
      ->needs(compare);
  cmd->callback([=] {
    if (!a->compare.empty()) {
      const std::string &name_a = a->compare[0], &name_b = a->compare[1];
      // Two summary JSONs of repeated runs (they start with '{'), or two requests.csv.
      const std::optional<nlohmann::json> ja = summary_file(name_a), jb = summary_file(name_b);
      if (ja.has_value() != jb.has_value())
        fail("--compare: {} is a {} but {} is a {}; compare two requests.csv or two summaries of repeated runs",
             name_a, ja ? "summary JSON" : "CSV", name_b, jb ? "summary JSON" : "CSV");
      const bool over_runs = ja.has_value();
      auto rows = over_runs ? compare_repeated(*ja, *jb, name_a, name_b, a->compare_options)
                            : compare_runs(read_requests_csv(name_a), read_requests_csv(name_b), a->compare_options);
      if (a->json)
        std::printf("%s\n", comparison_json(rows, name_a, name_b, a->compare_options, over_runs).dump(2).c_str());
      else std::fputs(format_comparison(rows, name_a, name_b, a->compare_options, over_runs).c_str(), stdout);
      return;
    }
    if (a->csv.empty()) fail("report: give a requests.csv, or --compare A.csv B.csv");
    Slo slo = a->slo.empty() ? Slo{} : parse_slo(a->slo);
    require_writable(a->html, "--html");
    const std::vector<RequestRecord> records = read_requests_csv(a->csv);
    Summary summary = summarize_or_exit(records, slo, parse_percentile_method(a->percentiles));
    // The run's series: the one named, else the one bench serve wrote beside the CSV, if any.
    std::error_code ec;
    const std::string series_file =
        !a->series.empty() ? a->series
        : std::filesystem::exists(series_path_for(a->csv), ec) ? series_path_for(a->csv).string() : "";
    const std::vector<SeriesSample> series = series_file.empty() ? std::vector<SeriesSample>{} : read_series_csv(series_file);
    if (!a->html.empty()) write_text(a->html, requests_report_html(records, summary, a->csv, &series));
    nlohmann::json series_summary;
    if (!series_file.empty()) {
      series_summary = series_json(series);
      series_summary["file"] = series_file;
    }
    if (a->json) {
      nlohmann::json j = summary_json(summary);
      if (!series_file.empty()) j["server_series"] = series_summary;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::fputs(format_report(summary).c_str(), stdout);
      if (!series_file.empty()) std::fputs(format_series(series_summary).c_str(), stdout);
    }
  });
}

std::shared_ptr<const TextTokenizer> optional_tokenizer(const std::string& tokenizer, const std::string& model) {
  if (!tokenizer.empty()) return lab_tokenizer(Tokenizer::load(tokenizer));
  if (model.empty()) return nullptr;
  try {
    return lab_tokenizer(Tokenizer::load(model));  // --model names a local folder or a cached HF repo
  } catch (const Error&) {
    return nullptr;
  }
}

struct WarmupResult {
  std::size_t successful = 0;
  std::string interrupted_by;
};

// --warmup N: the first N prompts (cycled when N > the prompt count) sent with the run's options,
// their records dropped — they warm the server's caches and connections, like vLLM's warm-ups.
WarmupResult run_warmup(const ServeOptions& options, const std::vector<BenchPrompt>& prompts, int count) {
  if (count <= 0 || prompts.empty()) return {};
  std::vector<BenchPrompt> warm;
  for (int i = 0; i < count; ++i) warm.push_back(prompts[i % prompts.size()]);
  ServeOptions quiet = options;
  quiet.progress = false;
  quiet.request_rate = 0;  // no arrival schedule: the warm-up only has to be served
  ServeRun run = run_serve_benchmark(quiet, warm);
  WarmupResult result{.interrupted_by = run.interrupted_by};
  for (const auto& r : run.records) result.successful += r.status == "ok";
  return result;
}

// --repeat K: K runs one after the other. Records keep one time axis (ms since the first run's
// start) so the pooled window spans them all; with K > 1 each gets its run number (1..K).
ServeRun run_repeated(const ServeOptions& options, const std::vector<BenchPrompt>& prompts, int repeat) {
  using Clock = std::chrono::steady_clock;
  const auto first_start = Clock::now();
  ServeRun all;
  for (int k = 1; k <= repeat; ++k) {
    // Run 1 keeps its times exactly (a single run's CSV and summary stay bit-identical to before).
    const double offset_ms =
        k == 1 ? 0.0 : std::chrono::duration<double, std::milli>(Clock::now() - first_start).count();
    ServeRun run = run_serve_benchmark(options, prompts);
    if (k == 1) all.started = run.started;  // the series' time axis: the records' origin
    for (auto& r : run.records) {
      r.start_ms += offset_ms;
      r.end_ms += offset_ms;
      if (repeat > 1) r.run = k;
      all.records.push_back(std::move(r));
    }
    all.duration_s += run.duration_s;
    all.max_in_flight = std::max(all.max_in_flight, run.max_in_flight);
    if (all.output_tokens_source.empty()) all.output_tokens_source = run.output_tokens_source;
    else if (all.output_tokens_source.find(run.output_tokens_source) == std::string::npos)
      all.output_tokens_source += ", " + run.output_tokens_source;
    all.interrupted_by = run.interrupted_by;
    if (!run.interrupted_by.empty()) break;  // a signal ends the whole series
  }
  return all;
}

// One Summary per run number present (1..K); runs that recorded no request are left out.
std::vector<Summary> summarize_runs(const std::vector<RequestRecord>& records, int repeat, const Slo& slo,
                                    PercentileMethod percentiles) {
  std::vector<Summary> out;
  if (repeat <= 1) return out;
  for (int k = 1; k <= repeat; ++k) {
    std::vector<RequestRecord> of_run;
    for (const auto& r : records)
      if (r.run == k) of_run.push_back(r);
    if (!of_run.empty()) out.push_back(summarize_or_exit(of_run, slo, percentiles));
  }
  return out;
}

// The summary's environment object (docs/measurement.md). cache_warm: a warm-up was served, or a
// measured request said some of its prompt came from a prefix cache.
nlohmann::json run_environment(const std::optional<nlohmann::json>& load_before, const nlohmann::json& target,
                               const Summary& summary, const WarmupResult& warmup) {
  nlohmann::json env = host_environment();
  env["load_average_before"] = load_before ? *load_before : nlohmann::json(nullptr);
  const std::optional<nlohmann::json> load_after = load_average();
  env["load_average_after"] = load_after ? *load_after : nlohmann::json(nullptr);
  env["target"] = target;
  env["prefix_cache_hit_tokens"] = summary.cache_reported ? nlohmann::json(summary.cached_tokens) : nlohmann::json(nullptr);
  env["cache_warm"] = warmup.successful > 0 || summary.cached_tokens > 0;
  return env;
}

// The dataset flags bench serve and bench capacity share: --dataset (vLLM's --dataset-name),
// --dataset-path, the lengths (with vLLM's per-dataset spellings as aliases) and each dataset's own
// shape flags. A shape flag given with a dataset it does not shape is an error, not ignored.
struct DatasetArgs {
  std::string name = "random";
  DatasetRequest request;
  CLI::Option *input_len = nullptr, *output_len = nullptr;
  std::vector<std::pair<CLI::Option*, std::vector<std::string>>> shaping;  // flag -> the datasets it applies to
};

void add_dataset_options(CLI::App* cmd, DatasetArgs& d) {
  std::string help = "where the prompts come from:";
  for (const Dataset& dataset : datasets()) help += fmt::format("\n  {}: {}", dataset.name, dataset.summary);
  cmd->add_option("--dataset,--dataset-name", d.name, help)->check(CLI::IsMember(dataset_names()));
  cmd->add_option("--dataset-path", d.request.path,
                  "the dataset's file (sharegpt-json, custom, sonnet, multi-turn); never fetched");
  d.input_len = cmd->add_option("--input-len,--random-input-len,--sonnet-input-len", d.request.input_len,
                                "prompt tokens (random 128, sonnet 550; user turns of random-multi-turn 64)")
                    ->check(CLI::PositiveNumber);
  d.output_len = cmd->add_option("--output-len,--random-output-len,--sonnet-output-len,--sharegpt-output-len,"
                                 "--custom-output-len,--prefix-repetition-output-len,--gsp-output-len",
                                 d.request.output_len,
                                 "max_tokens of each request (default: the dataset's: random 64, sonnet 150, "
                                 "prefix_repetition 128, generated-shared-prefix 256, random-multi-turn 64; "
                                 "sharegpt, custom and multi-turn: the file's)")
                     ->check(CLI::PositiveNumber);
  auto shape = [&](CLI::Option* option, std::vector<std::string> applies_to) {
    d.shaping.emplace_back(option, std::move(applies_to));
  };
  shape(cmd->add_option("--random-range-ratio", d.request.range_ratio,
                        "random: each request's input and output lengths uniform in [L(1-R), L(1+R)] (vLLM's; 0..1)")
            ->check(CLI::Range(0.0, 0.999)),
        {"random"});
  shape(cmd->add_option("--sonnet-prefix-len", d.request.prefix_len, "sonnet: tokens of the shared first lines (200)")
            ->check(CLI::NonNegativeNumber),
        {"sonnet"});
  shape(cmd->add_option("--prefix-repetition-prefix-len", d.request.prefix_len,
                        "prefix_repetition: tokens of each shared prefix (256)")
            ->check(CLI::NonNegativeNumber),
        {"prefix_repetition"});
  shape(cmd->add_option("--prefix-repetition-suffix-len", d.request.suffix_len,
                        "prefix_repetition: tokens of each request's own suffix (256)")
            ->check(CLI::PositiveNumber),
        {"prefix_repetition"});
  shape(cmd->add_option("--prefix-repetition-num-prefixes", d.request.num_prefixes,
                        "prefix_repetition: how many prefixes (10)")
            ->check(CLI::PositiveNumber),
        {"prefix_repetition"});
  shape(cmd->add_option("--gsp-num-groups", d.request.gsp_num_groups, "generated-shared-prefix: system prompts (64)")
            ->check(CLI::PositiveNumber),
        {"generated-shared-prefix"});
  shape(cmd->add_option("--gsp-prompts-per-group", d.request.gsp_prompts_per_group,
                        "generated-shared-prefix: questions per system prompt (16)")
            ->check(CLI::PositiveNumber),
        {"generated-shared-prefix"});
  shape(cmd->add_option("--gsp-system-prompt-len", d.request.gsp_system_prompt_len,
                        "generated-shared-prefix: tokens of each system prompt (2048)")
            ->check(CLI::PositiveNumber),
        {"generated-shared-prefix"});
  shape(cmd->add_option("--gsp-question-len", d.request.gsp_question_len,
                        "generated-shared-prefix: tokens of each question (128)")
            ->check(CLI::PositiveNumber),
        {"generated-shared-prefix"});
  shape(cmd->add_option("--num-turns", d.request.num_turns,
                        "random-multi-turn: user turns per conversation (3); multi-turn: at most this many")
            ->check(CLI::PositiveNumber),
        {"random-multi-turn", "multi-turn"});
}

// The dataset's prompts for `count` requests (conversations for multi-turn datasets); lengths not
// given are left to the dataset's defaults.
std::vector<BenchPrompt> dataset_prompts_for(const DatasetArgs& d, int count, uint64_t seed, const TextTokenizer* tokenizer) {
  for (const auto& [option, applies_to] : d.shaping)
    if (option->count() && std::find(applies_to.begin(), applies_to.end(), d.name) == applies_to.end())
      fail("{} shapes --dataset {}, not {}", option->get_name(), applies_to.front(), d.name);
  if (!find_dataset(d.name).needs_path && !d.request.path.empty())
    fail("--dataset {} reads no file; --dataset-path {} would be ignored", d.name, d.request.path);
  DatasetRequest request = d.request;
  request.count = count;
  request.seed = seed;
  request.tokenizer = tokenizer;
  if (!d.input_len->count()) request.input_len = 0;
  if (!d.output_len->count()) request.output_len = 0;
  return dataset_prompts(d.name, request);
}

nlohmann::json dataset_json(const DatasetArgs& d) {
  nlohmann::json j = {{"dataset", d.name},
                      {"input_len", d.input_len->count() ? nlohmann::json(d.request.input_len) : nlohmann::json(nullptr)},
                      {"output_len", d.output_len->count() ? nlohmann::json(d.request.output_len) : nlohmann::json(nullptr)}};
  if (!d.request.path.empty()) j["dataset_path"] = d.request.path;
  for (const auto& [option, applies_to] : d.shaping)
    if (option->count()) {  // --num-turns 3 -> "num_turns": 3 (every shape flag takes a number)
      std::string key = option->get_name().substr(2);
      std::replace(key.begin(), key.end(), '-', '_');
      j[key] = nlohmann::json::parse(option->as<std::string>());
    }
  return j;
}

void add_bench_serve(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("serve", "Load-test an OpenAI-compatible server with streaming requests and "
                                            "write per-request timings (requests.csv) and a summary");
  struct Args {
    ServeOptions serve;
    int num_requests = 0;
    std::string tokenizer, output = "requests.csv", summary, slo, percentiles, html;
    DatasetArgs dataset;
    int warmup = 0, repeat = 1;
    bool no_progress = false, no_scrape = false;
    std::vector<std::string> replicas;
    std::string scrape_interval = "1s", metrics_url;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--base-url", a->serve.base_url, "server URL, e.g. http://127.0.0.1:30000 (/v1 added when missing)")
      ->required();
  cmd->add_option("--model", a->serve.model, "model name sent to the server (default: the first of GET /v1/models)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "tokenizer (model folder, tokenizer.json, .gguf) for exact prompt lengths and for counting output "
                  "tokens when the server sends no usage (default: --model when it is a local or cached model)");
  cmd->add_option("--num-requests", a->num_requests, "how many requests (multi-turn datasets: conversations)")
      ->required()
      ->check(CLI::PositiveNumber);
  auto* conc = cmd->add_option("--concurrency", a->serve.concurrency,
                               "requests in flight at most (multi-turn datasets: conversations in flight)")
                   ->check(CLI::PositiveNumber);
  auto* rate = cmd->add_option("--request-rate", a->serve.request_rate,
                               "Poisson arrivals, requests/s (with --concurrency: a cap on those in flight)")
                   ->check(CLI::PositiveNumber);
  cmd->add_option("--burstiness", a->serve.burstiness, "gamma shape of the arrival gaps: 1 Poisson, <1 burstier")
      ->check(CLI::PositiveNumber)
      ->needs(rate);
  add_dataset_options(cmd, a->dataset);
  cmd->add_flag("--ignore-eos", a->serve.ignore_eos, "ask the server to ignore EOS so every request yields --output-len");
  cmd->add_option("--timeout", a->serve.timeout_s, "seconds per request before it counts as timeout")
      ->default_val(300)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->serve.seed, "seed for prompts and arrival times");
  cmd->add_option("--endpoint", a->serve.endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->check(CLI::IsMember({"chat", "completions"}));
  cmd->add_option("--api-key", a->serve.api_key, "sent as Authorization: Bearer KEY")->envname("INFERLAB_API_KEY");
  cmd->add_option("--output", a->output, "per-request CSV (default requests.csv; '' to skip)");
  cmd->add_option("--summary", a->summary, "JSON summary file");
  cmd->add_option("--html", a->html, "the report as one self-contained HTML page (as report --html)");
  cmd->add_option("--slo", a->slo, "goodput objectives, e.g. ttft_ms=200,tpot_ms=50");
  add_percentiles_option(cmd, a->percentiles);
  cmd->add_flag("--no-progress", a->no_progress, "no progress bar even on a terminal");
  cmd->add_option("--warmup", a->warmup, "requests sent first (the first prompts) and left out of the CSV and summary")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeat", a->repeat,
                  "independent runs of the same load, one after the other; the summary adds each metric's median "
                  "over runs, its bootstrap 95 % CI and CV")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--replica-metrics", a->replicas,
                  "URL,URL,...: the replicas behind --base-url's load balancer (as scripts/replicas prints them); "
                  "their /metrics are read before and after the run for a per-replica table of completed requests, "
                  "share and generated tokens, checked against the client's counts")
      ->delimiter(',');
  cmd->add_option("--scrape-interval", a->scrape_interval,
                  "during the run, the server's /metrics and this machine's CPU utilisation and frequency are read "
                  "every this long (1s, 500ms, 0.5), into NAME.series.csv beside --output, the summary and --html "
                  "(default 1s; the server's part when its /metrics answers)");
  auto* metrics_url = cmd->add_option("--metrics-url", a->metrics_url,
                                      "the /metrics to scrape (default: --base-url's root + /metrics); one given must answer");
  cmd->add_flag("--no-scrape", a->no_scrape, "record no series during the run")->excludes(metrics_url);
  cmd->callback([=] {
    if (conc->count() == 0 && rate->count() == 0) fail("give --concurrency C or --request-rate R (or both)");
    const double scrape_interval_s = parse_interval(a->scrape_interval, "--scrape-interval");
    const std::string series_file = a->output.empty() || a->no_scrape ? "" : series_path_for(a->output).string();
    require_writable(a->output, "--output");
    require_writable(a->summary, "--summary");
    require_writable(a->html, "--html");
    require_writable(series_file, "--output's series file");
    Slo slo = a->slo.empty() ? Slo{} : parse_slo(a->slo);
    const PercentileMethod percentiles = parse_percentile_method(a->percentiles);
    ServeOptions options = a->serve;
    options.tokenizer = optional_tokenizer(a->tokenizer, options.model);
    if (options.model.empty()) options.model = first_model_id(options.base_url, options.api_key, std::min(options.timeout_s, 30.0));
    options.progress = !a->no_progress && isatty(fileno(stderr));
    std::vector<BenchPrompt> prompts =
        dataset_prompts_for(a->dataset, a->num_requests, options.seed, options.tokenizer.get());
    const std::optional<nlohmann::json> load_before = load_average();
    const nlohmann::json target = target_environment(options.base_url, options.api_key, std::min(options.timeout_s, 30.0));
    // Every replica must answer its /metrics before any load is sent: a typo must not cost a run.
    for (std::size_t i = 0; i < a->replicas.size(); ++i)
      for (std::size_t k = 0; k < i; ++k)
        if (replica_metrics_url(a->replicas[i]) == replica_metrics_url(a->replicas[k]))
          fail("--replica-metrics: {} and {} are the same replica (it would be counted twice)", a->replicas[k],
               a->replicas[i]);
    auto scrape_all = [&] {
      std::vector<ReplicaScrape> out;
      for (const auto& replica : a->replicas) out.push_back(scrape_replica(replica, options.api_key, 10));
      return out;
    };
    for (const auto& s : scrape_all())
      if (!s.counters) fail("--replica-metrics {}: {}", s.replica, s.error);
    // The series: the server's /metrics when it answers (a --metrics-url given must), and this machine.
    ScrapeOptions scrape{.metrics_url = a->metrics_url.empty() ? replica_metrics_url(options.base_url) : a->metrics_url,
                         .api_key = options.api_key,
                         .interval_s = scrape_interval_s};
    std::string not_scraped;
    if (!a->no_scrape) {
      not_scraped = probe_metrics(scrape.metrics_url, options.api_key, std::min(options.timeout_s, 10.0));
      if (!not_scraped.empty() && !a->metrics_url.empty()) fail("--metrics-url: {}", not_scraped);
      if (!not_scraped.empty()) scrape.metrics_url.clear();
    }
    const WarmupResult warmup = run_warmup(options, prompts, a->warmup);
    const std::vector<ReplicaScrape> replicas_before = scrape_all();  // after the warm-up: it is not measured
    std::optional<SeriesRecorder> recorder;
    if (!a->no_scrape && warmup.interrupted_by.empty()) recorder.emplace(scrape);
    ServeRun run = warmup.interrupted_by.empty() ? run_repeated(options, prompts, a->repeat) : ServeRun{};
    const std::vector<SeriesSample> series = recorder ? recorder->stop(run.started) : std::vector<SeriesSample>{};
    const std::vector<ReplicaScrape> replicas_after = scrape_all();
    if (run.interrupted_by.empty()) run.interrupted_by = warmup.interrupted_by;
    if (run.records.empty() && !warmup.interrupted_by.empty())
      exit_with(fmt::format("interrupted by {} during the warm-up; nothing measured", warmup.interrupted_by));
    if (!a->output.empty()) write_requests_csv(a->output, run.records);
    if (recorder && !series_file.empty()) write_series_csv(series_file, series);
    nlohmann::json series_summary;
    if (recorder) {
      series_summary = series_json(series);
      series_summary["file"] = series_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(series_file);
      if (!not_scraped.empty()) series_summary["server_not_scraped"] = not_scraped;
      if (!recorder->first_error().empty()) series_summary["first_scrape_error"] = recorder->first_error();
    }
    Summary summary = summarize_or_exit(run.records, slo, percentiles);
    const std::vector<Summary> per_run = summarize_runs(run.records, a->repeat, slo, percentiles);
    const RepeatOptions repeat_options{.seed = options.seed};
    const std::vector<RepeatedMetric> repeated =
        per_run.size() > 1 ? repeat_metrics(per_run, repeat_options) : std::vector<RepeatedMetric>{};
    const std::optional<ReplicaReport> replicas =
        a->replicas.empty() ? std::nullopt
                            : std::optional(replica_report(replicas_before, replicas_after,
                                                           static_cast<int64_t>(summary.successful), summary.output_tokens));
    if (!a->summary.empty()) {
      nlohmann::json j = summary_json(summary);
      // Cut short by SIGINT/SIGTERM: the figures cover only the requests sent before it.
      j["partial"] = !run.interrupted_by.empty();
      if (!run.interrupted_by.empty()) j["interrupted_by"] = run.interrupted_by;
      j["run"] = {{"base_url", options.base_url},
                  {"model", options.model},
                  {"endpoint", options.endpoint},
                  {"num_requests", a->num_requests},
                  {"concurrency", options.concurrency},
                  {"request_rate", options.request_rate},
                  {"burstiness", options.burstiness},
                  {"ignore_eos", options.ignore_eos},
                  {"timeout_s", options.timeout_s},
                  {"seed", options.seed},
                  {"warmup", a->warmup},
                  {"repeat", a->repeat},
                  {"duration_s", run.duration_s},
                  {"max_in_flight", run.max_in_flight},
                  {"tokenizer", options.tokenizer ? (a->tokenizer.empty() ? options.model : a->tokenizer) : ""},
                  {"prompt_lengths", options.tokenizer ? "exact (tokenizer)" : "approximate (random words)"},
                  {"output_tokens_source", run.output_tokens_source}};
      j["run"].update(dataset_json(a->dataset));
      if (a->warmup > 0) j["warmup"] = {{"requests", a->warmup}, {"successful", warmup.successful}, {"excluded", true}};
      if (!repeated.empty()) j["repeat"] = repeat_json(repeated, per_run.size(), repeat_options);
      if (replicas) j["replicas"] = replica_report_json(*replicas);
      if (recorder) j["server_series"] = series_summary;
      j["environment"] = run_environment(load_before, target, summary, warmup);
      write_text(a->summary, j.dump(2) + "\n");
    }
    if (!a->html.empty())
      write_text(a->html, requests_report_html(run.records, summary,
                                               fmt::format("bench serve {} ({}), {} requests", options.base_url,
                                                           options.model, run.records.size()),
                                               &series));
    if (a->warmup > 0)
      std::printf("Warm-up: %d requests sent first (%zu ok), excluded from the CSV and the figures below\n", a->warmup,
                  warmup.successful);
    std::fputs(format_report(summary).c_str(), stdout);
    std::printf("Output tokens counted from: %s%s\n", run.output_tokens_source.c_str(),
                run.output_tokens_source.find("content chunks") != std::string::npos
                    ? " (the server sent no usage and no --tokenizer was given: one chunk counted as one token)"
                    : "");
    if (!options.tokenizer && !find_dataset(a->dataset.name).needs_path)
      std::printf("Prompt lengths approximate: random words, about a token each (give --tokenizer for exact token "
                  "counts)\n");
    if (!repeated.empty()) {
      std::printf("All %zu runs pooled above; run column in the CSV\n", per_run.size());
      std::fputs(format_repeat(repeated, per_run.size(), repeat_options).c_str(), stdout);
    }
    if (replicas) std::fputs(format_replica_report(*replicas).c_str(), stdout);
    if (recorder) {
      std::fputs(format_series(series_summary).c_str(), stdout);
      if (!not_scraped.empty()) std::printf("Server metrics not scraped: %s\n", not_scraped.c_str());
      if (!recorder->first_error().empty())
        std::printf("Some scrapes failed; the first: %s\n", recorder->first_error().c_str());
      if (!series_file.empty()) std::printf("Series: %s\n", series_file.c_str());
    }
    std::printf("Max in flight: %d; wall time %.3f s\n", run.max_in_flight, run.duration_s);
    if (!run.interrupted_by.empty())
      std::printf("PARTIAL: interrupted by %s; the figures cover the %zu requests sent before it\n",
                  run.interrupted_by.c_str(), run.records.size());
  });
}

// "LOW:HIGH" (or one value: LOW = HIGH) of --rates / --concurrency-levels.
std::pair<double, double> parse_load_range(const std::string& text, const char* flag) {
  const auto colon = text.find(':');
  const std::string low = text.substr(0, colon), high = colon == std::string::npos ? low : text.substr(colon + 1);
  auto number = [&](const std::string& item) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !(v > 0) || !std::isfinite(v))
      fail("{}: '{}' is not a positive number (write LOW:HIGH, e.g. 0.5:64)", flag, item);
    return v;
  };
  const double lo = number(low), hi = number(high);
  if (hi < lo) fail("{}: {} is below {} (write LOW:HIGH)", flag, high, low);
  return {lo, hi};
}

void add_bench_capacity(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("capacity", "SLO capacity search: the highest Poisson request rate (or concurrency) "
                                               "whose requests meet --slo; sweep, bisection, repeated points, curve, "
                                               "knee, JSON and SVG");
  struct Args {
    ServeOptions serve;
    std::string slo, rates = "0.5:64", levels, tokenizer, output_dir = "capacity", html;
    int num_requests = 100, warmup = 0;
    DatasetArgs dataset;
    CapacityOptions capacity;
    bool json = false, no_files = false;
  };
  auto a = std::make_shared<Args>();
  a->serve.timeout_s = 60;
  cmd->add_option("--base-url", a->serve.base_url, "server URL, e.g. http://127.0.0.1:30000 (/v1 added when missing)")
      ->required();
  cmd->add_option("--slo", a->slo,
                  "objectives, METRIC_pNN_ms=BOUND with METRIC ttft, tpot or e2e, e.g. ttft_p95_ms=200,tpot_p95_ms=50")
      ->required();
  auto* rates = cmd->add_option("--rates", a->rates, "Poisson request rates searched, LOW:HIGH req/s (default 0.5:64)");
  cmd->add_option("--concurrency-levels", a->levels, "search concurrency levels LOW:HIGH instead of rates (closed loop)")
      ->excludes(rates);
  cmd->add_option("--repeat", a->capacity.repeat,
                  "most runs per point (K, default 3): a point is run again until the bootstrap CI of every SLO "
                  "metric is on one side of its bound")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--num-requests", a->num_requests, "requests per run (default 100)")->check(CLI::PositiveNumber);
  cmd->add_option("--sweep-factor", a->capacity.sweep_factor, "the sweep multiplies the load by this (default 2)");
  cmd->add_option("--resolution", a->capacity.resolution,
                  "rates: bisection stops when first failing / last passing <= 1 + this (default 0.1); "
                  "concurrency: at adjacent levels");
  cmd->add_option("--model", a->serve.model, "model name sent to the server (default: the first of GET /v1/models)");
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer for exact prompt lengths and token counts (as bench serve)");
  add_dataset_options(cmd, a->dataset);
  cmd->add_flag("--ignore-eos", a->serve.ignore_eos, "ask the server to ignore EOS so every request yields --output-len");
  cmd->add_option("--burstiness", a->serve.burstiness, "gamma shape of the arrival gaps: 1 Poisson (default)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", a->serve.timeout_s, "seconds per request before it counts as timeout (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", a->serve.seed, "seed of prompts, arrivals and the bootstrap");
  cmd->add_option("--endpoint", a->serve.endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->check(CLI::IsMember({"chat", "completions"}));
  cmd->add_option("--api-key", a->serve.api_key, "sent as Authorization: Bearer KEY")->envname("INFERLAB_API_KEY");
  cmd->add_option("--warmup", a->warmup, "requests sent once before the search, left out of every figure")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--output-dir", a->output_dir,
                  "where capacity.json, capacity.svg and requests.csv (every run, its run column) go (default capacity)");
  cmd->add_flag("--no-files", a->no_files, "write no files");
  cmd->add_option("--html", a->html, "also write the capacity curve and every point's figures as one self-contained HTML page");
  cmd->add_flag("--json", a->json, "print capacity.json's content instead of the text report");
  cmd->callback([=] {
    CapacityOptions options = a->capacity;
    options.slo = parse_capacity_slo(a->slo);
    options.kind = a->levels.empty() ? LoadKind::Rate : LoadKind::Concurrency;
    std::tie(options.low, options.high) = a->levels.empty() ? parse_load_range(a->rates, "--rates")
                                                            : parse_load_range(a->levels, "--concurrency-levels");
    options.statistics.seed = a->serve.seed;
    const std::filesystem::path dir = a->output_dir;
    if (!a->no_files) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) fail("--output-dir {}: cannot be created ({})", a->output_dir, ec.message());
      for (const char* name : {"capacity.json", "capacity.svg", "requests.csv"})
        require_writable((dir / name).string(), "--output-dir");
    }
    require_writable(a->html, "--html");
    ServeOptions serve = a->serve;
    serve.tokenizer = optional_tokenizer(a->tokenizer, serve.model);
    if (serve.model.empty()) serve.model = first_model_id(serve.base_url, serve.api_key, std::min(serve.timeout_s, 30.0));
    const std::optional<nlohmann::json> load_before = load_average();
    const nlohmann::json target = target_environment(serve.base_url, serve.api_key, std::min(serve.timeout_s, 30.0));
    const WarmupResult warmup =
        run_warmup(serve, dataset_prompts_for(a->dataset, std::max(a->warmup, 1), serve.seed, serve.tokenizer.get()),
                   a->warmup);
    if (!warmup.interrupted_by.empty()) exit_with(fmt::format("interrupted by {} during the warm-up", warmup.interrupted_by));

    std::vector<RequestRecord> all;
    auto run_load = [&](double load, int run) {
      ServeOptions o = serve;
      o.seed = serve.seed + static_cast<uint64_t>(run);  // each run its own prompts and arrivals
      if (options.kind == LoadKind::Rate) o.request_rate = load;
      else o.concurrency = static_cast<int>(load);
      ServeRun r = run_serve_benchmark(o, dataset_prompts_for(a->dataset, a->num_requests, o.seed, serve.tokenizer.get()));
      for (auto& record : r.records) {
        record.run = run;
        all.push_back(record);
      }
      return CapacityRun{.records = std::move(r.records), .interrupted_by = r.interrupted_by};
    };
    const char* unit = load_unit(options.kind);
    auto on_point = [&](const CapacityPoint& p) {
      std::string objectives;
      for (const auto& r : p.objectives)
        objectives += fmt::format(" {} {:.2f} [{:.2f}, {:.2f}]", r.objective.key, r.median, r.ci.low, r.ci.high);
      std::fprintf(stderr, "capacity: %s %g %s, %zu run(s):%s -> %s%s\n", p.phase.c_str(), p.load, unit,
                   p.runs.size(), objectives.c_str(), p.meets ? "meets" : "fails",
                   p.decided_by == "median" ? " (CI straddles; median decided)" : "");
    };
    const CapacityResult result = search_capacity(options, run_load, on_point);

    nlohmann::json j = capacity_json(result, options);
    j["run"] = {{"base_url", serve.base_url}, {"model", serve.model},           {"endpoint", serve.endpoint},
                {"num_requests", a->num_requests},
                {"ignore_eos", serve.ignore_eos}, {"burstiness", serve.burstiness}, {"timeout_s", serve.timeout_s},
                {"warmup", a->warmup}};
    j["run"].update(dataset_json(a->dataset));
    j["environment"] = run_environment(load_before, target,
                                       all.empty() ? Summary{} : summarize_or_exit(all, {}, PercentileMethod::NearestRank),
                                       warmup);
    if (!a->no_files) {
      write_text((dir / "capacity.json").string(), j.dump(2) + "\n");
      write_text((dir / "capacity.svg").string(),
                 capacity_svg(result, options, fmt::format("{}: capacity under {}", serve.model, a->slo)));
      write_requests_csv(dir / "requests.csv", all);
    }
    if (!a->html.empty())
      write_text(a->html, capacity_report_html(result, options, fmt::format("{}: capacity under {}", serve.model, a->slo),
                                               fmt::format("bench capacity {} ({}), {} requests per run", serve.base_url,
                                                           serve.model, a->num_requests)));
    if (a->json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("Capacity search: %s, %s..%s %s, %d requests per run, up to %d runs per point\n",
                  options.kind == LoadKind::Rate ? "Poisson arrivals" : "closed loop",
                  fmt::format("{:g}", options.low).c_str(), fmt::format("{:g}", options.high).c_str(), unit,
                  a->num_requests, options.repeat);
      std::fputs(format_capacity(result, options).c_str(), stdout);
      if (!a->no_files)
        std::printf("Wrote %s, %s, %s\n", (dir / "capacity.json").c_str(), (dir / "capacity.svg").c_str(),
                    (dir / "requests.csv").c_str());
    }
    if (result.outcome == "interrupted") throw CLI::RuntimeError(130);
  });
}

std::vector<int> parse_lengths(const std::string& text) {
  const std::vector<long> values = parse_int_list(text, 1, INT32_MAX, "--lengths", "a positive number of tokens");
  if (values.size() < 2) fail("--lengths: give at least two lengths, e.g. 8,16,32,64,128,256");
  return {values.begin(), values.end()};
}

void add_bench_latency(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("latency", "The course's chapter 3: greedy-generation latency against input length "
                                              "(median of repeats), linear fit, verdicts, CSV and SVG");
  struct Args {
    std::string model, lengths = "8,16,32,64,128,256", csv, svg, html;
    LatencyOptions options;
    bool check_repeat = false;
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("model", a->model, "model folder or HF repo id (e.g. a distilgpt2 from make-model --preset distilgpt2)")
      ->required();
  cmd->add_option("--lengths", a->lengths, "input lengths, comma-separated")->default_val("8,16,32,64,128,256");
  cmd->add_option("--gen-len", a->options.gen_len, "tokens generated per run (EOS ignored)")->default_val(20);
  cmd->add_option("--repeat", a->options.repeat, "timed runs per length; the median is reported")->default_val(5);
  cmd->add_option("--token-id", a->options.token_id, "the id repeated to build each input (the course uses 101)")
      ->default_val(101);
  cmd->add_flag("--check-repeat", a->check_repeat, "run the sweep twice and check each length agrees within 20 %");
  cmd->add_option("--csv", a->csv, "write the points (both runs with --check-repeat) as CSV");
  cmd->add_option("--svg", a->svg, "write a scatter plot with the fitted line as SVG");
  cmd->add_option("--html", a->html, "write a self-contained HTML page: the plot with both fits and the points' table");
  cmd->add_option("--threads", a->threads, "compute threads (0 = all cores)")->default_val(0);
  cmd->callback([=] {
    require_writable(a->csv, "--csv");
    require_writable(a->svg, "--svg");
    require_writable(a->html, "--html");
    LatencyOptions options = a->options;
    options.lengths = parse_lengths(a->lengths);
    options.on_length_done = [](int length) { std::fprintf(stderr, "  measured %d tokens\n", length); };
    LoadOptions load;
    load.threads = a->threads;
    std::unique_ptr<Model> model = Model::load(a->model, load);
    std::printf("Model: %s (%s, %d layers, hidden %d), gen_len %d, repeat %d, input = id %d repeated\n",
                a->model.c_str(), model->config().architecture.c_str(), model->config().num_layers,
                model->config().hidden_size, options.gen_len, options.repeat, options.token_id);
    std::vector<LatencySweep> runs;
    runs.push_back(measure_latency(*model, options));
    if (a->check_repeat) runs.push_back(measure_latency(*model, options));
    const LatencySweep& sweep = runs.front();
    std::fputs(course_table(sweep).c_str(), stdout);

    std::printf("\n%-10s %12s %12s %18s\n", "input_len", "latency_s", "prefill_s", "decode_ms/token");
    for (const auto& p : sweep.points)
      std::printf("%-10d %12.4f %12.4f %18.3f\n", p.input_len, p.latency_s, p.prefill_s, p.decode_s_per_token * 1000);
    std::printf("Linear-fit slope: %.3e s per input token (prefill alone: %.3e s/token; intercept %.4f s)\n",
                sweep.fit.slope, sweep.prefill_fit.slope, sweep.fit.intercept);

    std::vector<double> latencies;
    for (const auto& p : sweep.points) latencies.push_back(p.latency_s);
    std::string detail;
    bool monotonic = increases_monotonically(latencies, kLatencyWobble, &detail);
    std::printf("Verdict: monotonic increase (no step down by more than %.0f %%, last above first): %s%s\n",
                kLatencyWobble * 100, monotonic ? "yes" : "NO - ", monotonic ? "" : detail.c_str());
    std::printf("Verdict: slope > 0: %s\n", sweep.fit.slope > 0 ? "yes" : "NO - the input does not reach the computation");
    bool in_range = sweep.fit.slope >= 1e-4 && sweep.fit.slope <= 1e-2;
    std::printf("Note: slope %s the course's typical CPU range 1e-4..1e-2 s/token\n", in_range ? "within" : "outside");
    if (a->check_repeat) {
      double worst = 0;
      int worst_len = 0;
      for (std::size_t i = 0; i < sweep.points.size(); ++i) {
        double x = runs[0].points[i].latency_s, y = runs[1].points[i].latency_s;
        double diff = std::abs(x - y) / std::min(x, y);
        if (diff > worst) worst = diff, worst_len = sweep.points[i].input_len;
      }
      std::printf("Verdict: two runs within 20 %%: %s (largest difference %.1f %% at %d tokens)\n",
                  worst < 0.2 ? "yes" : "NO", worst * 100, worst_len);
    }
    if (!a->csv.empty()) write_text(a->csv, latency_csv(runs));
    const std::string title = fmt::format("{}: latency vs input length (gen_len {}, median of {})",
                                          model->config().architecture, options.gen_len, options.repeat);
    if (!a->svg.empty()) write_text(a->svg, latency_svg(sweep, title));
    if (!a->html.empty())
      write_text(a->html, latency_report_html(runs, title,
                                              fmt::format("{} ({} layers, hidden {}), input = id {} repeated", a->model,
                                                          model->config().num_layers, model->config().hidden_size,
                                                          options.token_id)));
  });
}

void add_chat(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "The course's stream client: one chat completion from an OpenAI-compatible "
                                         "server, printed as it arrives, then E2E and first-content times");
  auto o = std::make_shared<ChatOptions>();
  auto message = std::make_shared<std::string>();
  o->stream = false;
  cmd->add_option("--base-url", o->base_url, "e.g. http://127.0.0.1:30000/v1")->default_val("http://127.0.0.1:30000/v1");
  cmd->add_option("--model", o->model, "model name (default: the first of GET /v1/models)");
  cmd->add_flag("--stream", o->stream, "stream the answer (server-sent events)");
  cmd->add_option("--max-tokens", o->max_tokens, "max_tokens")->default_val(64)->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", o->temperature, "temperature (0 = greedy)")->default_val(0.0);
  cmd->add_option("--frequency-penalty", o->frequency_penalty, "frequency_penalty (OpenAI's, -2..2; 0: not sent)")
      ->default_val(0.0);
  cmd->add_option("--seed", o->seed, "seed of the server's sampler (with --temperature > 0: the same answer again)");
  cmd->add_option("--timeout", o->timeout_s, "seconds")->default_val(60.0)->check(CLI::PositiveNumber);
  cmd->add_option("--api-key", o->api_key, "sent as Authorization: Bearer KEY")->envname("INFERLAB_API_KEY");
  cmd->add_option("message", *message, "the user message")->required();
  cmd->callback([=] {
    ChatResult result = chat(*o, *message, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\nE2E: %.1f ms\n", result.e2e_ms);
    if (result.first_content_ms) std::printf("First content: %.1f ms\n", *result.first_content_ms);
  });
}

}  // namespace

static Registrar reg([](CLI::App& app) {
  add_report(app);
  add_chat(app);
  CLI::App& bench = command_group(app, "bench", "Benchmarks: serve (load generator), latency (course chapter 3), ...");
  add_bench_serve(bench);
  add_bench_capacity(bench);
  add_bench_latency(bench);
});

}  // namespace inferlab::cli
