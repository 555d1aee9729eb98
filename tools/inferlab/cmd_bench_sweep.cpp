// `inferlab bench sweep`: server flags x load, one server start and one bench serve per point, the
// Pareto frontier (see inferlab/lab/sweep.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "inferlab/lab/html_report.h"
#include "inferlab/lab/sweep.h"

namespace inferlab::cli {
namespace {

using namespace inferlab::lab;

// The running executable: every point runs this same build of inferlab.
std::string this_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this executable (/proc/self/exe: {})", ec.message());
  return path.string();
}

// "1,8,32" -> loads of one kind; each a positive number (whole for concurrency).
std::vector<SweepLoad> parse_loads(const std::string& text, const std::string& kind, const char* flag) {
  std::vector<SweepLoad> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || !(v > 0) || !std::isfinite(v) || (kind == "concurrency" && v != std::floor(v)))
      fail("{}: '{}' is not a positive {}", flag, item, kind == "concurrency" ? "whole number" : "number");
    out.push_back({kind, v});
  }
  if (out.empty()) fail("{}: give at least one value, e.g. 1,8", flag);
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) fail("cannot write {}", path.string());
}

static Registrar reg([](CLI::App& app) {
  CLI::App& bench = command_group(app, "bench", "Benchmarks: serve (load generator), latency (course chapter 3), ...");
  struct Args {
    std::string model, concurrency, rates, serve_params, bench_args, output_dir = "sweep", html;
    std::vector<std::string> serve_args;
    double ready_timeout_s = 300;
    bool json = false, dry_run = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = bench.add_subcommand(
      "sweep", "Server flags x load, as vLLM's bench sweep serve: each point one start of inferlab serve MODEL (127.0.0.1, "
               "a free port, /health awaited) and one bench serve; every point's files in --output-dir, sweep.json, "
               "and the Pareto frontier of output tokens/s against tokens/s per user (pareto.svg, --html)");
  cmd->add_option("model", a->model, "the model every point serves (as inferlab serve takes it)")->required();
  cmd->add_option("--serve-args", a->serve_args,
                  "one server variant: flags added to inferlab serve, e.g. '--max-batch 4' (repeat for more variants; "
                  "none: the server's defaults)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--serve-params", a->serve_params,
                  "server variants from a JSON file in vLLM's --serve-params form: a list of objects (or an object of "
                  "name -> object) of flags, e.g. [{\"max_batch\": 4}, {\"max_batch\": 16}] (true: --flag, false: --no-flag)");
  auto* conc = cmd->add_option("--concurrency", a->concurrency, "the load axis: concurrency levels, e.g. 1,8");
  cmd->add_option("--request-rate", a->rates, "the load axis: Poisson request rates (req/s), e.g. 2,8")->excludes(conc);
  cmd->add_option("--bench-args", a->bench_args,
                  "flags given to every point's bench serve, e.g. '--num-requests 32 --input-len 64 --output-len 32 "
                  "--ignore-eos' (it needs --num-requests)")
      ->required();
  cmd->add_option("--output-dir", a->output_dir, "where every point's folder, sweep.json and pareto.svg go (default sweep)");
  cmd->add_option("--server-ready-timeout", a->ready_timeout_s, "seconds to wait for a server's /health (default 300)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--html", a->html, "also write the Pareto plot and every point's figures as one self-contained HTML page");
  cmd->add_flag("--json", a->json, "print sweep.json's content instead of the table");
  cmd->add_flag("--dry-run", a->dry_run, "print each point's two commands, run nothing");
  cmd->callback([a] {
    SweepOptions o;
    o.cli = this_executable();
    o.model = a->model;
    if (!a->serve_params.empty()) o.serve = read_serve_params(a->serve_params);
    for (const auto& text : a->serve_args) {
      const std::vector<std::string> args = split_args(text, "--serve-args");
      o.serve.push_back({variant_name(args), args});
    }
    if (o.serve.empty()) o.serve.push_back({"default", {}});
    if (a->concurrency.empty() && a->rates.empty()) fail("give the load axis: --concurrency 1,8 or --request-rate 2,8");
    o.loads = a->concurrency.empty() ? parse_loads(a->rates, "request_rate", "--request-rate")
                                     : parse_loads(a->concurrency, "concurrency", "--concurrency");
    o.bench_args = split_args(a->bench_args, "--bench-args");
    o.output_dir = a->output_dir;
    o.ready_timeout_s = a->ready_timeout_s;
    o.dry_run = a->dry_run;
    check_sweep_args(o);
    const std::filesystem::path dir = a->output_dir;
    if (!a->dry_run) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) fail("--output-dir {}: cannot be created ({})", a->output_dir, ec.message());
      write_file(dir / "sweep.json", "{}\n");  // writable now, not after the last point
    }
    if (!a->html.empty()) write_file(a->html, "");
    const nlohmann::json sweep = run_sweep(o, [](const std::string& line) { std::fprintf(stderr, "sweep: %s\n", line.c_str()); });
    const std::string title = fmt::format("{}: output tokens/s against tokens/s per user", a->model);
    if (!a->dry_run) {
      write_file(dir / "sweep.json", sweep.dump(2) + "\n");
      write_file(dir / "pareto.svg", pareto_svg(sweep, title));
    }
    if (!a->html.empty())
      write_file(a->html, sweep_report_html(sweep, fmt::format("bench sweep {} ({} points)", a->model, sweep["points"].size())));
    if (a->json) std::printf("%s\n", sweep.dump(2).c_str());
    else {
      std::fputs(format_sweep(sweep).c_str(), stdout);
      if (!a->dry_run) std::printf("Wrote %s, %s\n", (dir / "sweep.json").c_str(), (dir / "pareto.svg").c_str());
    }
    std::size_t failed = 0;
    for (const auto& p : sweep["points"]) failed += p.contains("error") && p["error"].is_string();
    if (sweep.contains("interrupted_by")) throw CLI::RuntimeError(130);
    if (failed > 0) {
      std::fprintf(stderr, "sweep: %zu point(s) not measured (their error in sweep.json)\n", failed);
      throw CLI::RuntimeError(1);
    }
  });
});

}  // namespace
}  // namespace inferlab::cli
