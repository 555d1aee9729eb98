// `inferlab bench sweep` (see sweep.h): one server start and one bench serve per point.
#include "inferlab/lab/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "lab/interrupt.h"
#include "inferlab/util/error.h"
#include "lab/child_process.h"
#include "lab/http_client.h"
#include "lab/svg_plot.h"

namespace inferlab::lab {
namespace {

using nlohmann::json;

std::string load_text(const SweepLoad& load) {
  return load.kind == "concurrency" ? fmt::format("concurrency {:g}", load.value) : fmt::format("{:g} req/s", load.value);
}

// Waits for GET /health to answer 200; "" when it did, else why not.
std::string wait_until_ready(ChildProcess& server, int port, double timeout_s, const std::filesystem::path& log) {
  const std::string url = fmt::format("http://127.0.0.1:{}/health", port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!server.running())
      return fmt::format("the server exited with status {} before it was ready; the end of {}:\n{}", server.exit_status(),
                         log.string(), tail_of(log, 12));
    HttpResponse r = fetch({.url = url, .api_key = "", .timeout_ms = 2000, .connect_timeout_ms = 1000});
    if (r.outcome.end == TransferOutcome::End::answered && r.outcome.status == 200) return "";
    last = r.outcome.end == TransferOutcome::End::answered ? fmt::format("HTTP {}", r.outcome.status) : r.outcome.error;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fmt::format("GET {} did not answer 200 within {:g} s (last: {}); the end of {}:\n{}", url, timeout_s, last,
                     log.string(), tail_of(log, 12));
}

// The figures of a point from its bench serve summary JSON.
json point_figures(const json& summary, const SweepLoad& load) {
  json f;
  f["output_throughput_token_per_s"] = summary.at("output_throughput_token_per_s");
  f["request_throughput_req_per_s"] = summary.at("request_throughput_req_per_s");
  f["successful"] = summary.at("successful");
  f["failed"] = summary.at("failed");
  for (const char* metric : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    const json& m = summary.at(metric);
    const bool any = m.value("n", 0) > 0;
    f[metric] = {{"p50", any ? m.at("p50") : json(nullptr)}, {"p95", any ? m.at("p95") : json(nullptr)}};
  }
  // vLLM's plot_pareto: the users are the concurrency (with a request rate: the most requests seen in flight).
  const double users = load.kind == "concurrency" ? load.value : summary.at("run").value("max_in_flight", 0.0);
  f["users"] = users;
  f["tokens_per_user_per_s"] = users > 0 ? json(summary.at("output_throughput_token_per_s").get<double>() / users) : json(nullptr);
  return f;
}

}  // namespace

std::vector<std::string> split_args(const std::string& text, const char* flag) {
  std::vector<std::string> out;
  std::string current;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) current += text[++i];
      else current += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      current += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(current)), current.clear();
      in_word = false;
    } else {
      current += c;
      in_word = true;
    }
  }
  if (quote) fail("{} '{}': a {} quote is never closed", flag, text, quote == '"' ? "double" : "single");
  if (in_word) out.push_back(std::move(current));
  return out;
}

std::string variant_name(const std::vector<std::string>& args) {
  std::string name;
  for (const auto& a : args) {
    std::string part;
    for (char c : a) part += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ? c : '-';
    while (part.starts_with("-")) part.erase(0, 1);
    if (part.empty()) continue;
    name += (name.empty() ? "" : "-") + part;
  }
  if (name.size() > 60) name.resize(60);
  return name.empty() ? "default" : name;
}

std::vector<SweepServeVariant> read_serve_params(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--serve-params {}: cannot be read", path.string());
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) fail("--serve-params {}: not valid JSON", path.string());
  std::vector<std::pair<std::string, json>> items;
  if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) items.emplace_back("", j[i]);
  } else if (j.is_object()) {
    for (const auto& [name, v] : j.items()) items.emplace_back(name, v);
  } else {
    fail("--serve-params {}: expected a list of objects or an object of name -> object", path.string());
  }
  std::vector<SweepServeVariant> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto& [given_name, params] = items[i];
    if (!params.is_object()) fail("--serve-params {}: item {} is not an object of flags", path.string(), i + 1);
    SweepServeVariant v;
    v.name = given_name;
    for (const auto& [key, value] : params.items()) {
      if (key == "_benchmark_name") {
        if (!value.is_string()) fail("--serve-params {}: item {}: _benchmark_name is not a string", path.string(), i + 1);
        v.name = value.get<std::string>();
        continue;
      }
      std::string flag = key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      if (value.is_boolean()) v.args.push_back((value.get<bool>() ? "--" : "--no-") + flag);
      else if (value.is_string()) v.args.insert(v.args.end(), {"--" + flag, value.get<std::string>()});
      else if (value.is_number()) v.args.insert(v.args.end(), {"--" + flag, value.dump()});
      else fail("--serve-params {}: item {}: {} is neither a string, a number nor a boolean", path.string(), i + 1, key);
    }
    if (v.name.empty()) v.name = variant_name(v.args);
    out.push_back(std::move(v));
  }
  if (out.empty()) fail("--serve-params {}: no parameter sets", path.string());
  return out;
}

void check_sweep_args(const SweepOptions& options) {
  auto refuse = [](const std::vector<std::string>& args, std::initializer_list<const char*> owned, const char* flag,
                   const char* why) {
    for (const auto& a : args)
      for (const char* o : owned)
        if (a == o || a.starts_with(std::string(o) + "="))
          fail("{} must not set {}: {}", flag, o, why);
  };
  for (const auto& v : options.serve)
    refuse(v.args, {"--host", "--port"}, "--serve-args", "each point's server listens on 127.0.0.1 on a free port");
  refuse(options.bench_args, {"--base-url", "--output", "--summary", "--html"}, "--bench-args",
         "each point's bench serve writes into its own folder of --output-dir");
  refuse(options.bench_args, {"--concurrency", "--request-rate"}, "--bench-args",
         "the load is the sweep's own axis (give --concurrency or --request-rate to bench sweep)");
  std::vector<std::string> names;
  for (const auto& v : options.serve) {
    if (std::find(names.begin(), names.end(), v.name) != names.end())
      fail("two server variants are both named '{}'; give each a different set of flags (or _benchmark_name)", v.name);
    names.push_back(v.name);
  }
}

std::vector<bool> pareto_frontier(const std::vector<std::pair<double, double>>& points) {
  std::vector<bool> on(points.size(), true);
  for (std::size_t i = 0; i < points.size(); ++i)
    for (std::size_t k = 0; k < points.size() && on[i]; ++k)
      if (k != i && points[k].first >= points[i].first && points[k].second >= points[i].second &&
          (points[k].first > points[i].first || points[k].second > points[i].second))
        on[i] = false;
  return on;
}

json run_sweep(const SweepOptions& options, const std::function<void(const std::string&)>& log) {
  check_sweep_args(options);
  json j;
  j["model"] = options.model;
  j["bench_args"] = options.bench_args;
  j["ready_timeout_s"] = options.ready_timeout_s;
  j["points"] = json::array();
  InterruptScope interrupt;  // Ctrl-C ends the sweep after the point in progress; what was measured is kept
  int index = 0;
  for (const auto& variant : options.serve) {
    for (const auto& load : options.loads) {
      ++index;
      const std::string dir_name = fmt::format("{:02d}-{}-{}{:g}", index, variant.name,
                                               load.kind == "concurrency" ? "c" : "rate", load.value);
      const std::filesystem::path dir = options.output_dir / dir_name;
      json point = {{"index", index},
                    {"serve", variant.name},
                    {"serve_args", variant.args},
                    {"load", {{"kind", load.kind}, {"value", load.value}}},
                    {"dir", dir_name}};
      const int port = options.dry_run ? 0 : free_local_port();
      const std::string port_text = options.dry_run ? "PORT" : std::to_string(port);  // a dry run picks none
      std::vector<std::string> serve_cmd = {options.cli, "serve", options.model, "--host", "127.0.0.1", "--port", port_text};
      serve_cmd.insert(serve_cmd.end(), variant.args.begin(), variant.args.end());
      std::vector<std::string> bench_cmd = {options.cli, "bench", "serve", "--base-url", "http://127.0.0.1:" + port_text,
                                            "--no-progress", "--output", (dir / "requests.csv").string(),
                                            "--summary", (dir / "summary.json").string(), "--html",
                                            (dir / "report.html").string(),
                                            load.kind == "concurrency" ? "--concurrency" : "--request-rate",
                                            fmt::format("{:g}", load.value)};
      bench_cmd.insert(bench_cmd.end(), options.bench_args.begin(), options.bench_args.end());
      auto joined = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
        return s;
      };
      point["serve_command"] = joined(serve_cmd);
      point["bench_command"] = joined(bench_cmd);
      log(fmt::format("point {}: {} at {}", index, variant.name, load_text(load)));
      if (options.dry_run) {
        log("  " + joined(serve_cmd));
        log("  " + joined(bench_cmd));
        j["points"].push_back(point);
        continue;
      }
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) fail("--output-dir: cannot create {} ({})", dir.string(), ec.message());
      const auto started = std::chrono::steady_clock::now();
      std::string error;
      try {
        ChildProcess server(serve_cmd, dir / "server.log");
        error = wait_until_ready(server, port, options.ready_timeout_s, dir / "server.log");
        point["server_ready_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (error.empty()) {
          ChildProcess bench(bench_cmd, dir / "bench.log");
          const int status = bench.wait();
          if (status != 0)
            error = fmt::format("bench serve exited with status {}; the end of {}:\n{}", status,
                                (dir / "bench.log").string(), tail_of(dir / "bench.log", 12));
        }
        const int server_status = server.stop(30);
        point["server_exit_status"] = server_status;
      } catch (const Error& e) {  // a child that could not be started: this point is not measured, the others are
        error = e.what();
      }
      if (error.empty()) {
        std::ifstream in(dir / "summary.json", std::ios::binary);
        json summary = json::parse(in, nullptr, false);
        if (summary.is_discarded()) error = fmt::format("{} is not valid JSON", (dir / "summary.json").string());
        else point["figures"] = point_figures(summary, load);
      }
      point["error"] = error.empty() ? json(nullptr) : json(error);
      log(error.empty() ? fmt::format("  {:.2f} output token/s, {:.2f} token/s per user",
                                      point["figures"]["output_throughput_token_per_s"].get<double>(),
                                      point["figures"]["tokens_per_user_per_s"].is_number()
                                          ? point["figures"]["tokens_per_user_per_s"].get<double>() : 0.0)
                        : "  NOT MEASURED: " + error);
      j["points"].push_back(point);
      if (interrupt.signal()) {
        j["interrupted_by"] = interrupt.name();
        break;
      }
    }
    if (j.contains("interrupted_by")) break;
  }
  // The frontier over the measured points: throughput per user (x) against throughput (y).
  std::vector<std::pair<double, double>> xy;
  std::vector<std::size_t> measured;
  for (std::size_t i = 0; i < j["points"].size(); ++i) {
    const json& p = j["points"][i];
    if (p.contains("figures") && p["figures"]["tokens_per_user_per_s"].is_number()) {
      xy.emplace_back(p["figures"]["tokens_per_user_per_s"].get<double>(),
                      p["figures"]["output_throughput_token_per_s"].get<double>());
      measured.push_back(i);
    }
  }
  const std::vector<bool> on = pareto_frontier(xy);
  for (auto& p : j["points"]) p["pareto"] = false;
  for (std::size_t k = 0; k < measured.size(); ++k) j["points"][measured[k]]["pareto"] = static_cast<bool>(on[k]);
  j["pareto"] = {{"x", "tokens_per_user_per_s"}, {"y", "output_throughput_token_per_s"},
                 {"rule", "no other point has at least as much of both and more of one"}};
  return j;
}

std::string format_sweep(const json& sweep) {
  std::string out = fmt::format("{:>3}  {:<24} {:>16} {:>12} {:>14} {:>10} {:>10} {:>10}  {}\n", "#", "server flags", "load",
                                "output tok/s", "tok/s per user", "TTFT p50", "TPOT p50", "E2E p50", "Pareto");
  auto number = [](const json& v, int d) { return v.is_number() ? fmt::format("{:.{}f}", v.get<double>(), d) : std::string("-"); };
  for (const auto& p : sweep["points"]) {
    const std::string load = p["load"]["kind"] == "concurrency" ? fmt::format("c={:g}", p["load"]["value"].get<double>())
                                                              : fmt::format("{:g} req/s", p["load"]["value"].get<double>());
    if (!p.contains("figures")) {
      out += fmt::format("{:>3}  {:<24} {:>16}  {}\n", p["index"].get<int>(), p["serve"].get<std::string>(), load,
                         p.contains("error") && p["error"].is_string() ? "NOT MEASURED (see sweep.json)" : "(dry run)");
      continue;
    }
    const json& f = p["figures"];
    out += fmt::format("{:>3}  {:<24} {:>16} {:>12} {:>14} {:>10} {:>10} {:>10}  {}\n", p["index"].get<int>(),
                       p["serve"].get<std::string>(), load, number(f["output_throughput_token_per_s"], 2),
                       number(f["tokens_per_user_per_s"], 2), number(f["ttft_ms"]["p50"], 2), number(f["tpot_ms"]["p50"], 2),
                       number(f["e2e_ms"]["p50"], 2), p["pareto"].get<bool>() ? "frontier" : "");
  }
  out += "Tokens/s per user = output throughput / concurrency (vLLM's plot_pareto; with a request rate, / the most "
         "requests in flight). Frontier: no other point has at least as much of both and more of one. Times in ms.\n";
  return out;
}

std::string pareto_svg(const json& sweep, const std::string& title) {
  const double width = 760, height = 420;
  double max_x = 0, max_y = 0;
  struct P {
    double x, y;
    bool frontier;
    std::string label;
  };
  std::vector<P> points;
  for (const auto& p : sweep["points"]) {
    if (!p.contains("figures") || !p["figures"]["tokens_per_user_per_s"].is_number()) continue;
    const json& f = p["figures"];
    points.push_back({f["tokens_per_user_per_s"].get<double>(), f["output_throughput_token_per_s"].get<double>(),
                      p["pareto"].get<bool>(),
                      fmt::format("#{} {} {}{:g}", p["index"].get<int>(), p["serve"].get<std::string>(),
                                  p["load"]["kind"] == "concurrency" ? "c=" : "rate=", p["load"]["value"].get<double>())});
    max_x = std::max(max_x, points.back().x);
    max_y = std::max(max_y, points.back().y);
  }
  svg::Frame f{.left = 80, .right = width - 30, .top = 40, .bottom = height - 56, .x_min = 0,
               .x_max = max_x > 0 ? max_x * 1.15 : 1, .y_min = 0, .y_max = max_y > 0 ? max_y * 1.15 : 1};
  std::string out = svg::open(width, height) + svg::title(width, title);
  out += svg::axes(f, 5, 1, 1, "output tokens/s per user (throughput / concurrency)", "output tokens/s");
  std::vector<P> frontier;
  for (const auto& p : points)
    if (p.frontier) frontier.push_back(p);
  std::sort(frontier.begin(), frontier.end(), [](const P& a, const P& b) { return a.x < b.x; });
  if (frontier.size() > 1) {
    std::string path;
    for (std::size_t i = 0; i < frontier.size(); ++i)
      path += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", f.px(frontier[i].x), f.py(frontier[i].y));
    out += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\"/>\n", path);
  }
  for (const auto& p : points)
    out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" data-frontier=\"{}\"><title>{}: {:.2f} token/s, "
                       "{:.2f} token/s per user</title></circle>\n<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n",
                       f.px(p.x), f.py(p.y), p.frontier ? 6 : 4.5, p.frontier ? "#d62728" : "#888888", p.frontier,
                       svg::escape(p.label), p.y, p.x, f.px(p.x) + 8, f.py(p.y) - 6, svg::escape(p.label));
  return out + "</svg>\n";
}

}  // namespace inferlab::lab
