// `inferlab bench soak`: a reliability run against a live server (see inferlab/lab/soak.h).
#include <cstdio>

#include "command.h"
#include "inferlab/lab/datasets.h"
#include "inferlab/lab/soak.h"
#include "inferlab/util/error.h"

namespace {

using inferlab::cli::command_group;
using inferlab::cli::Registrar;

static Registrar reg([](CLI::App& app) {
  CLI::App& bench = command_group(app, "bench", "Benchmarks: serve (load generator), latency (course chapter 3), ...");
  auto o = std::make_shared<inferlab::lab::SoakOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "soak", "Reliability soak of a server: mixed streaming/non-streaming greedy requests (chats, forced tool calls, "
              "json_schema outputs), cancellations and malformed requests; checks every answer against a sequential "
              "baseline, structured answers against their schema, and that the server returns to idle");
  cmd->add_option("--base-url", o->base_url, "Server URL, e.g. http://127.0.0.1:30000 (with or without /v1)")->required();
  cmd->add_option("--duration", o->duration_s, "Seconds of load")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "Requests in flight")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--cancel-rate", o->cancel_rate, "Fraction of requests the client aborts mid-way")->capture_default_str();
  cmd->add_option("--malformed-rate", o->malformed_rate, "Fraction of deliberately invalid requests (expect 4xx)")
      ->capture_default_str();
  cmd->add_option("--stream-fraction", o->stream_fraction, "Fraction of valid requests that stream")->capture_default_str();
  cmd->add_option("--tool-call-rate", o->tool_call_rate,
                  "Fraction of valid requests with a strict tool and tool_choice \"required\" (0 for a server without tools)")
      ->capture_default_str();
  cmd->add_option("--json-schema-rate", o->json_schema_rate,
                  "Fraction of valid requests with response_format json_schema (strict); 0 for a server without it")
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "max_tokens of plain chat requests")->capture_default_str();
  cmd->add_option("--structured-max-tokens", o->structured_max_tokens, "max_tokens of tool-call and json_schema requests")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Model name to send (default: the first of /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Bearer key")->envname("INFERLAB_API_KEY");
  cmd->add_option("--seed", o->seed, "Seed of the request mix")->capture_default_str();
  cmd->add_option("--timeout", o->request_timeout_s, "Per-request timeout in seconds")->capture_default_str();
  cmd->add_option("--server-pid", o->server_pid, "Read the server's RSS from /proc/PID/status");
  cmd->add_option("--rss-tolerance", o->rss_tolerance, "Allowed growth of RSS over its idle level (fraction)")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup_s, "Seconds of load before the idle RSS is read (default: min(30, duration/10))");
  cmd->add_option("--settle", o->settle_s, "Seconds to wait for the server to go idle after the run")->capture_default_str();
  cmd->add_flag("--progress", o->progress, "Print running counts on stderr");
  // Its prompts may come from the load generator's dataset registry (single requests only: every
  // prompt gets a sequential baseline first, and its answer is checked against it).
  auto dataset = std::make_shared<std::string>();
  auto dataset_request = std::make_shared<inferlab::lab::DatasetRequest>();
  dataset_request->count = 8;
  auto* dataset_option = cmd->add_option("--dataset,--dataset-name", *dataset,
                                         "take the prompts from this dataset of bench serve's (its prompts only: "
                                         "--max-tokens is sent); default: the soak's own eight")
                             ->check(CLI::IsMember(inferlab::lab::dataset_names()));
  cmd->add_option("--dataset-path", dataset_request->path, "the dataset's file")->needs(dataset_option);
  cmd->add_option("--num-prompts", dataset_request->count, "how many prompts to take from --dataset (default 8)")
      ->check(CLI::PositiveNumber)
      ->needs(dataset_option);
  cmd->callback([o, dataset, dataset_request] {
    if (!dataset->empty()) {
      if (inferlab::lab::find_dataset(*dataset).multi_turn)
        inferlab::fail("bench soak sends single requests; --dataset {} is multi-turn", *dataset);
      inferlab::lab::DatasetRequest request = *dataset_request;
      request.seed = o->seed;
      request.output_len = o->max_tokens;
      for (const auto& p : inferlab::lab::dataset_prompts(*dataset, request)) o->prompts.push_back(p.text);
    }
    inferlab::lab::SoakReport report = inferlab::lab::run_soak(*o);
    std::fputs(report.text(o->rss_tolerance).c_str(), stdout);
    std::fflush(stdout);
    if (!report.ok(o->rss_tolerance)) throw CLI::RuntimeError(1);
  });
});

}  // namespace
