#include "inferlab/lab/capacity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "lab/svg_plot.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string metric_label(const SloObjective& o) {
  std::string name = o.metric == "ttft" ? "TTFT" : o.metric == "tpot" ? "TPOT" : "E2E";
  return fmt::format("P{:g} {}", o.percentile * 100, name);
}

// "12.34 [10.00, 15.00]": a median and its interval ("inf" where failures rank last).
std::string with_ci(double median, const Interval& ci) {
  return fmt::format("{:.2f} [{:.2f}, {:.2f}]", median, ci.low, ci.high);
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string load_text(double load, LoadKind kind) {
  return kind == LoadKind::Concurrency ? fmt::format("{:.0f}", load) : fmt::format("{:.3g}", load);
}

// Goodput's per-request objectives: each metric's bound (the tightest when one is given twice).
Slo goodput_slo(const std::vector<SloObjective>& objectives) {
  Slo slo;
  for (const auto& o : objectives) {
    std::optional<double>& bound = o.metric == "ttft" ? slo.ttft_ms : o.metric == "tpot" ? slo.tpot_ms : slo.e2e_ms;
    bound = bound ? std::min(*bound, o.bound_ms) : o.bound_ms;
  }
  return slo;
}

// The curve's figures of one point over its runs: throughputs, goodput and p95 TTFT / TPOT.
std::vector<RepeatedMetric> curve_metrics(const std::vector<Summary>& runs, const RepeatOptions& statistics) {
  std::vector<RepeatedMetric> all = repeat_metrics(runs, statistics), out;
  auto take = [&](const char* name) {
    for (auto& m : all)
      if (m.name == name) out.push_back(m);
  };
  take("request_throughput");
  take("output_throughput");
  RepeatedMetric goodput;
  goodput.name = "goodput";
  goodput.label = "Goodput (req/s)";
  for (const Summary& s : runs) goodput.per_run.push_back(s.goodput);
  goodput.median = median(goodput.per_run);
  goodput.ci = bootstrap_median(goodput.per_run, statistics.resamples, statistics.confidence, statistics.seed);
  goodput.cv = coefficient_of_variation(goodput.per_run);
  goodput.unstable = goodput.cv > statistics.cv_warning;
  out.push_back(std::move(goodput));
  take("ttft_p95_ms");
  take("tpot_p95_ms");
  return out;
}

const RepeatedMetric* find_metric(const CapacityPoint& p, const std::string& name) {
  for (const auto& m : p.curve)
    if (m.name == name) return &m;
  return nullptr;
}

class Search {
 public:
  Search(const CapacityOptions& options, const RunLoad& run_load, const std::function<void(const CapacityPoint&)>& on_point)
      : o_(options), run_load_(run_load), on_point_(on_point) {}

  CapacityResult run() {
    sweep();
    if (result_.outcome.empty() && result_.capacity && result_.first_failing) bisect();
    if (result_.outcome.empty())
      result_.outcome = !result_.capacity ? "below range" : !result_.first_failing ? "above range" : "found";
    std::vector<std::pair<double, double>> curve;
    for (const auto& p : result_.points)
      if (const RepeatedMetric* m = find_metric(p, "ttft_p95_ms")) curve.emplace_back(p.load, m->median);
    std::sort(curve.begin(), curve.end());
    std::vector<double> loads, values;
    for (auto& [load, value] : curve) loads.push_back(load), values.push_back(value);
    result_.knee = find_knee(loads, values);
    return std::move(result_);
  }

 private:
  bool concurrency() const { return o_.kind == LoadKind::Concurrency; }

  // Measures one load; false when a signal ended the search.
  bool measure(double load, const char* phase) {
    CapacityPoint p;
    p.load = load;
    p.phase = phase;
    const int min_runs = std::min(2, o_.repeat);
    std::vector<Summary> summaries;
    std::vector<std::vector<RequestRecord>> runs;
    const Slo slo = goodput_slo(o_.slo);
    for (const auto& objective : o_.slo) {
      ObjectiveResult r;
      r.objective = objective;
      p.objectives.push_back(r);
    }
    for (int k = 1; k <= o_.repeat; ++k) {
      CapacityRun run = run_load_(load, ++run_counter_);
      if (!run.interrupted_by.empty()) {
        result_.outcome = "interrupted";
        result_.interrupted_by = run.interrupted_by;
        return false;
      }
      if (run.records.empty()) fail("bench capacity: a run at load {} recorded no request", load);
      p.runs.push_back(run_counter_);
      p.requests += run.records.size();
      for (const auto& r : run.records) p.failed += r.status != "ok";
      summaries.push_back(summarize(run.records, slo));
      bool all_below = true, some_above = false;
      for (auto& obj : p.objectives) {
        obj.per_run.push_back(objective_value(obj.objective, run.records));
        obj.median = median(obj.per_run);
        obj.ci = bootstrap_median(obj.per_run, o_.statistics.resamples, o_.statistics.confidence, o_.statistics.seed);
        all_below = all_below && obj.ci.high <= obj.objective.bound_ms;
        some_above = some_above || obj.ci.low > obj.objective.bound_ms;
      }
      if (k < min_runs) continue;
      if (all_below || some_above) {
        p.meets = all_below;
        p.decided_by = o_.repeat == 1 ? "single run" : "ci";
        break;
      }
      if (k == o_.repeat) {  // the CI still straddles: the medians decide, and the output says so
        p.meets = std::all_of(p.objectives.begin(), p.objectives.end(),
                              [](const ObjectiveResult& r) { return r.median <= r.objective.bound_ms; });
        p.decided_by = "median";
      }
    }
    p.curve = curve_metrics(summaries, o_.statistics);
    if (p.meets) result_.capacity = std::max(result_.capacity.value_or(load), load);
    else result_.first_failing = std::min(result_.first_failing.value_or(load), load);
    result_.points.push_back(p);
    if (on_point_) on_point_(result_.points.back());
    return true;
  }

  void sweep() {
    double load = o_.low;
    for (;;) {
      if (!measure(load, "sweep")) return;
      if (!result_.points.back().meets || load >= o_.high) return;
      double next = load * o_.sweep_factor;
      if (concurrency()) next = std::max(load + 1, std::round(next));
      load = std::min(next, o_.high);
    }
  }

  void bisect() {
    double lo = *result_.capacity, hi = *result_.first_failing;
    for (;;) {
      double mid;
      if (concurrency()) {
        if (hi - lo <= 1) return;
        mid = std::floor((lo + hi) / 2);
      } else {
        if (hi / lo <= 1 + o_.resolution) return;
        mid = std::sqrt(lo * hi);  // geometric: the step is relative, as the sweep's
      }
      if (!measure(mid, "bisect")) return;
      (result_.points.back().meets ? lo : hi) = mid;
    }
  }

  const CapacityOptions& o_;
  const RunLoad& run_load_;
  const std::function<void(const CapacityPoint&)>& on_point_;
  CapacityResult result_;
  int run_counter_ = 0;
};

void check_options(const CapacityOptions& o) {
  if (o.slo.empty()) fail("bench capacity: give --slo, e.g. ttft_p95_ms=200,tpot_p95_ms=50");
  const char* flag = o.kind == LoadKind::Rate ? "--rates" : "--concurrency-levels";
  if (!(o.low > 0) || !(o.high >= o.low) || !std::isfinite(o.high))
    fail("{}: need 0 < LOW <= HIGH, got {}:{}", flag, o.low, o.high);
  if (o.kind == LoadKind::Concurrency && (o.low != std::floor(o.low) || o.high != std::floor(o.high)))
    fail("{}: concurrency levels are whole numbers, got {}:{}", flag, o.low, o.high);
  if (!(o.sweep_factor > 1)) fail("--sweep-factor must be above 1, got {}", o.sweep_factor);
  if (!(o.resolution > 0)) fail("--resolution must be positive, got {}", o.resolution);
  if (o.repeat < 1) fail("--repeat must be at least 1, got {}", o.repeat);
}

}  // namespace

std::vector<SloObjective> parse_capacity_slo(const std::string& text) {
  static const std::regex key_pattern(R"((ttft|tpot|e2e)_p([0-9]+(\.[0-9]+)?)_ms)");
  std::vector<SloObjective> out;
  std::string rest = text;
  while (!rest.empty() || out.empty()) {
    const auto comma = rest.find(',');
    const std::string item = trim(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      fail("--slo: '{}' is not KEY=MS (e.g. ttft_p95_ms=200,tpot_p95_ms=50)", item);
    SloObjective o;
    o.key = trim(item.substr(0, eq));
    std::smatch m;
    if (!std::regex_match(o.key, m, key_pattern))
      fail("--slo: unknown objective '{}'; write METRIC_pNN_ms with METRIC ttft, tpot or e2e (e.g. ttft_p95_ms)", o.key);
    o.metric = m[1];
    o.percentile = std::stod(m[2]) / 100;
    if (!(o.percentile > 0 && o.percentile <= 1)) fail("--slo: {}: the percentile must be in (0, 100]", o.key);
    const std::string value = trim(item.substr(eq + 1));
    try {
      std::size_t used = 0;
      o.bound_ms = std::stod(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      fail("--slo: {}: '{}' is not a number of milliseconds", o.key, value);
    }
    if (!(o.bound_ms > 0) || !std::isfinite(o.bound_ms)) fail("--slo: {}: the bound must be positive, got {}", o.key, value);
    for (const auto& other : out)
      if (other.key == o.key) fail("--slo: {} is given twice", o.key);
    out.push_back(o);
    if (rest.empty()) break;
  }
  return out;
}

double objective_value(const SloObjective& objective, const std::vector<RequestRecord>& records) {
  if (records.empty()) return kInf;
  std::vector<double> values;
  for (const auto& r : records) {
    double v = kInf;
    if (r.status == "ok") {
      if (objective.metric == "e2e") {
        v = r.end_ms - r.start_ms;
      } else if (objective.metric == "ttft") {
        if (r.ttft_ms) v = *r.ttft_ms;
      } else {
        bool derived = false;
        if (auto t = request_tpot(r, &derived)) v = *t;
        else if (r.ttft_ms && r.output_tokens && *r.output_tokens <= 1) v = 0;  // no decode step
      }
    }
    values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  return nearest_rank(values, objective.percentile);
}

CapacityResult search_capacity(const CapacityOptions& options, const RunLoad& run_load,
                               const std::function<void(const CapacityPoint&)>& on_point) {
  check_options(options);
  return Search(options, run_load, on_point).run();
}

std::optional<double> find_knee(const std::vector<double>& loads, const std::vector<double>& values) {
  if (loads.size() < 3 || loads.size() != values.size()) return std::nullopt;
  const auto [x_lo, x_hi] = std::minmax_element(loads.begin(), loads.end());
  const auto [y_lo, y_hi] = std::minmax_element(values.begin(), values.end());
  if (!(*x_hi > *x_lo) || !(*y_hi > *y_lo) || !std::isfinite(*y_hi)) return std::nullopt;
  // Kneedle wants an increasing curve; a noisy dip (a later, lower P95) would look like a knee at
  // the dip, so each value counts as the highest one so far in load order.
  std::vector<std::size_t> order(loads.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return loads[a] < loads[b]; });
  double best = 0.1, envelope = -std::numeric_limits<double>::infinity();
  std::optional<double> knee;
  for (std::size_t i : order) {
    envelope = std::max(envelope, values[i]);
    const double x = (loads[i] - *x_lo) / (*x_hi - *x_lo), y = (envelope - *y_lo) / (*y_hi - *y_lo);
    if (x - y >= best) best = x - y, knee = loads[i];
  }
  return knee;
}

const char* load_unit(LoadKind kind) { return kind == LoadKind::Rate ? "req/s" : "streams"; }

std::string format_capacity(const CapacityResult& result, const CapacityOptions& o) {
  const bool rate = o.kind == LoadKind::Rate;
  const char* unit = load_unit(o.kind);
  std::vector<std::string> objectives;
  for (const auto& s : o.slo) objectives.push_back(fmt::format("{} <= {:g} ms", metric_label(s), s.bound_ms));
  std::string out = fmt::format("SLO: {} (nearest rank over all requests; a failed request misses every objective)\n",
                                fmt::join(objectives, ", "));
  std::vector<const CapacityPoint*> sorted;
  for (const auto& p : result.points) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->load < b->load; });
  out += fmt::format("Curve (median over a point's runs [bootstrap {:g} % CI]):\n", o.statistics.confidence * 100);
  out += fmt::format("{:>9}  {:>4}  {:>6}  {:<28}{:<28}{:<28}{:<28}{:<28}{}\n", rate ? "rate" : "streams", "runs",
                     "failed", "throughput (req/s)", "output (token/s)", "goodput (req/s)", "P95 TTFT (ms)",
                     "P95 TPOT (ms)", "SLO");
  for (const CapacityPoint* p : sorted) {
    out += fmt::format("{:>9}  {:>4}  {:>6}  ", load_text(p->load, o.kind), p->runs.size(), p->failed);
    for (const char* name : {"request_throughput", "output_throughput", "goodput", "ttft_p95_ms", "tpot_p95_ms"}) {
      const RepeatedMetric* m = find_metric(*p, name);
      out += fmt::format("{:<28}", m ? with_ci(m->median, m->ci) : "-");
    }
    out += p->meets ? "meets" : "fails";
    if (p->decided_by == "median") out += " (CI straddles; median decided)";
    out += "\n";
  }
  out += "SLO metrics per point (the verdict's inputs; inf: more requests failed than the percentile allows):\n";
  for (const CapacityPoint* p : sorted) {
    std::vector<std::string> parts;
    for (const auto& r : p->objectives)
      parts.push_back(fmt::format("{} {} (per run: {:.2f})", r.objective.key, with_ci(r.median, r.ci),
                                  fmt::join(r.per_run, ", ")));
    out += fmt::format("  {:>9} {}: {}\n", load_text(p->load, o.kind), unit, fmt::join(parts, "; "));
  }
  out += result.knee ? fmt::format("Knee: {} {} (P95 TTFT bends up most sharply there: Kneedle on its running maximum)\n",
                                   load_text(*result.knee, o.kind), unit)
                     : "Knee: none (fewer than 3 points, or the P95 TTFT curve hardly bends)\n";
  const std::string range = fmt::format("{}..{} {}", load_text(o.low, o.kind), load_text(o.high, o.kind), unit);
  if (result.outcome == "interrupted") out += fmt::format("Capacity: not found (interrupted by {})\n", result.interrupted_by);
  else if (result.outcome == "below range")
    out += fmt::format("Capacity: below the range {}: the lowest load {} {} fails the SLO\n", range,
                       load_text(o.low, o.kind), unit);
  else if (result.outcome == "above range")
    out += fmt::format("Capacity: at least {} {}: every load of the range {} meets the SLO\n",
                       load_text(*result.capacity, o.kind), unit, range);
  else
    out += fmt::format("Capacity: {} {} (the highest load meeting the SLO; {} {} fails; step {})\n",
                       load_text(*result.capacity, o.kind), unit, load_text(*result.first_failing, o.kind), unit,
                       load_text(*result.first_failing - *result.capacity, o.kind));
  std::size_t straddled = 0;
  for (const auto& p : result.points) straddled += p.decided_by == "median";
  if (straddled)
    out += fmt::format("Note: at {} point(s) the CI still straddled an objective after {} runs; the median decided "
                       "(docs/measurement.md)\n",
                       straddled, o.repeat);
  return out;
}

nlohmann::json capacity_json(const CapacityResult& result, const CapacityOptions& o) {
  nlohmann::json j;
  j["mode"] = o.kind == LoadKind::Rate ? "rate" : "concurrency";
  j["unit"] = load_unit(o.kind);
  j["range"] = {o.low, o.high};
  j["sweep_factor"] = o.sweep_factor;
  j["resolution"] = o.resolution;
  j["repeat"] = o.repeat;
  j["confidence"] = o.statistics.confidence;
  j["resamples"] = o.statistics.resamples;
  j["seed"] = o.statistics.seed;
  j["slo"] = nlohmann::json::array();
  for (const auto& s : o.slo)
    j["slo"].push_back({{"key", s.key}, {"metric", s.metric}, {"percentile", s.percentile}, {"bound_ms", s.bound_ms}});
  j["points"] = nlohmann::json::array();
  for (const auto& p : result.points) {
    nlohmann::json point = {{"load", p.load},         {"phase", p.phase},   {"runs", p.runs},
                            {"requests", p.requests}, {"failed", p.failed}, {"meets", p.meets},
                            {"decided_by", p.decided_by}};
    for (const auto& m : p.curve)
      point["metrics"][m.name] = {{"per_run", m.per_run}, {"median", m.median}, {"ci_low", m.ci.low},
                                  {"ci_high", m.ci.high}, {"cv", m.cv}};
    for (const auto& r : p.objectives) {
      nlohmann::json per_run = nlohmann::json::array();
      for (double v : r.per_run) per_run.push_back(number_or_null(v));
      point["objectives"][r.objective.key] = {{"per_run", per_run},
                                              {"median", number_or_null(r.median)},
                                              {"ci_low", number_or_null(r.ci.low)},
                                              {"ci_high", number_or_null(r.ci.high)},
                                              {"bound_ms", r.objective.bound_ms}};
    }
    j["points"].push_back(point);
  }
  j["outcome"] = result.outcome;
  j["capacity"] = result.capacity ? nlohmann::json(*result.capacity) : nlohmann::json(nullptr);
  j["first_failing"] = result.first_failing ? nlohmann::json(*result.first_failing) : nlohmann::json(nullptr);
  j["step"] = result.capacity && result.first_failing ? nlohmann::json(*result.first_failing - *result.capacity)
                                                      : nlohmann::json(nullptr);
  j["knee"] = result.knee ? nlohmann::json(*result.knee) : nlohmann::json(nullptr);
  if (!result.interrupted_by.empty()) j["interrupted_by"] = result.interrupted_by;
  return j;
}

std::string capacity_svg(const CapacityResult& result, const CapacityOptions& o, const std::string& title) {
  const double width = 720, height = 700;
  std::vector<const CapacityPoint*> sorted;
  for (const auto& p : result.points) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->load < b->load; });
  double max_load = o.low;
  for (const auto* p : sorted) max_load = std::max(max_load, p->load);
  // The largest finite value the series (CI included) and `extra` reach, with headroom.
  auto top_of = [&](const std::vector<const char*>& names, double extra) {
    double top = extra;
    for (const auto* p : sorted)
      for (const char* name : names)
        if (const RepeatedMetric* m = find_metric(*p, name))
          for (double v : {m->median, m->ci.high})
            if (std::isfinite(v)) top = std::max(top, v);
    return top > 0 ? top * 1.1 : 1.0;
  };
  double bound_top = 0;
  for (const auto& s : o.slo) bound_top = std::max(bound_top, s.bound_ms);
  const svg::Frame latency{.left = 80, .right = width - 150, .top = 50, .bottom = 320, .x_max = max_load * 1.05,
                           .y_max = top_of({"ttft_p95_ms", "tpot_p95_ms"}, bound_top)};
  svg::Frame throughput = latency;
  throughput.top = 400, throughput.bottom = 640;
  throughput.y_max = top_of({"request_throughput", "goodput"}, o.kind == LoadKind::Rate ? max_load : 0);
  const std::string x_label = o.kind == LoadKind::Rate ? "offered load (Poisson req/s)" : "concurrency (streams)";
  std::string out = svg::open(width, height) + svg::title(width, title);
  out += svg::axes(latency, 5, o.kind == LoadKind::Rate ? 1 : 0, 0, x_label, "P95 latency (ms)");
  out += svg::axes(throughput, 5, o.kind == LoadKind::Rate ? 1 : 0, 1, x_label, "req/s");

  // A series: the medians joined, each with its CI as a vertical bar; a legend entry at the right.
  auto series = [&](const svg::Frame& f, const char* name, const char* color, const std::string& label, int row) {
    std::string points;
    for (const auto* p : sorted) {
      const RepeatedMetric* m = find_metric(*p, name);
      if (!m || !std::isfinite(m->median)) continue;
      const double x = f.px(p->load);
      points += fmt::format("{:.1f},{:.1f} ", x, f.py(m->median));
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\"/>\n", x,
                         f.py(std::min(m->ci.low, f.y_max)), f.py(std::min(m->ci.high, f.y_max)), color);
      out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} {}: {} {}</title></circle>\n",
                         x, f.py(m->median), color, load_text(p->load, o.kind), load_unit(o.kind), label,
                         with_ci(m->median, m->ci));
    }
    if (!points.empty())
      out += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n", points, color);
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", f.right + 10, f.top + 14 + 16 * row, color,
                       svg::escape(label));
  };
  series(latency, "ttft_p95_ms", "#1f77b4", "P95 TTFT", 0);
  series(latency, "tpot_p95_ms", "#ff7f0e", "P95 TPOT", 1);
  int row = 2;
  for (const auto& s : o.slo) {
    if (s.bound_ms > latency.y_max) continue;
    out += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#d62728\" "
                       "stroke-dasharray=\"6 4\"/>\n",
                       latency.left, latency.py(s.bound_ms), latency.right);
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#d62728\">SLO {} = {:g}</text>\n", latency.right + 10,
                       latency.top + 14 + 16 * row++, svg::escape(s.key), s.bound_ms);
  }
  series(throughput, "request_throughput", "#2ca02c", "throughput", 0);
  series(throughput, "goodput", "#9467bd", "goodput", 1);
  if (o.kind == LoadKind::Rate)  // what an unsaturated server would serve
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\" "
                       "stroke-dasharray=\"3 3\"/>\n<text x=\"{}\" y=\"{}\" fill=\"#888\">offered</text>\n",
                       throughput.px(0), throughput.py(0), throughput.px(max_load), throughput.py(max_load),
                       throughput.right + 10, throughput.top + 14 + 32);
  // label_y: the capacity's label above the panel, the knee's just below its top edge (they may coincide).
  auto marker = [&](double load, const char* color, const std::string& label, double label_y) {
    for (const svg::Frame* f : {&latency, static_cast<const svg::Frame*>(&throughput)})
      out += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"{3}\" stroke-dasharray=\"2 3\"/>\n",
                         f->px(load), f->top, f->bottom, color);
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" fill=\"{}\" text-anchor=\"start\">{}</text>\n",
                       latency.px(load) + 4, label_y, color, svg::escape(label));
  };
  if (result.knee) marker(*result.knee, "#7f7f7f", "knee " + load_text(*result.knee, o.kind), latency.top + 12);
  if (result.capacity)
    marker(*result.capacity, "#2ca02c", "capacity " + load_text(*result.capacity, o.kind), latency.top - 6);
  out += "</svg>\n";
  return out;
}

}  // namespace inferlab::lab
