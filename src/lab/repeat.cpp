#include "inferlab/lab/repeat.h"

#include <fmt/format.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab::lab {

namespace {

struct MetricSource {
  const char* name;
  const char* label;
  std::function<double(const Summary&)> value;
  std::function<bool(const Summary&)> present;
};

const std::vector<MetricSource>& metric_sources() {
  auto has = [](const Distribution Summary::*d) { return [d](const Summary& s) { return (s.*d).n > 0; }; };
  auto always = [](const Summary&) { return true; };
  static const std::vector<MetricSource> sources = {
      {"ttft_p50_ms", "P50 TTFT (ms)", [](const Summary& s) { return s.ttft.p50; }, has(&Summary::ttft)},
      {"ttft_p95_ms", "P95 TTFT (ms)", [](const Summary& s) { return s.ttft.p95; }, has(&Summary::ttft)},
      {"tpot_p50_ms", "P50 TPOT (ms)", [](const Summary& s) { return s.tpot.p50; }, has(&Summary::tpot)},
      {"tpot_p95_ms", "P95 TPOT (ms)", [](const Summary& s) { return s.tpot.p95; }, has(&Summary::tpot)},
      {"itl_p50_ms", "P50 ITL (ms)", [](const Summary& s) { return s.itl.p50; }, has(&Summary::itl)},
      {"itl_p95_ms", "P95 ITL (ms)", [](const Summary& s) { return s.itl.p95; }, has(&Summary::itl)},
      {"e2e_p50_ms", "P50 E2E (ms)", [](const Summary& s) { return s.e2e.p50; }, has(&Summary::e2e)},
      {"e2e_p95_ms", "P95 E2E (ms)", [](const Summary& s) { return s.e2e.p95; }, has(&Summary::e2e)},
      {"output_throughput", "Output throughput (token/s)", [](const Summary& s) { return s.output_throughput; },
       always},
      {"request_throughput", "Request throughput (req/s)", [](const Summary& s) { return s.request_throughput; },
       always},
  };
  return sources;
}

}  // namespace

std::vector<RepeatedMetric> repeat_metrics(const std::vector<Summary>& runs, const RepeatOptions& options) {
  if (runs.empty()) fail("--repeat: no runs to summarize");
  std::vector<RepeatedMetric> out;
  for (const MetricSource& source : metric_sources()) {
    bool everywhere = true;
    for (const Summary& s : runs) everywhere = everywhere && source.present(s);
    if (!everywhere) continue;
    RepeatedMetric m;
    m.name = source.name;
    m.label = source.label;
    for (const Summary& s : runs) m.per_run.push_back(source.value(s));
    m.median = median(m.per_run);
    m.ci = bootstrap_median(m.per_run, options.resamples, options.confidence, options.seed);
    m.cv = coefficient_of_variation(m.per_run);
    m.unstable = m.cv > options.cv_warning;
    out.push_back(std::move(m));
  }
  return out;
}

std::string format_repeat(const std::vector<RepeatedMetric>& metrics, std::size_t runs, const RepeatOptions& options) {
  std::string out = fmt::format("Over {} runs: median [bootstrap {:.0f} % CI] (CV)\n", runs, options.confidence * 100);
  std::size_t width = 0;
  for (const auto& m : metrics) width = std::max(width, m.label.size());
  for (const auto& m : metrics)
    out += fmt::format("  {:<{}}  {:.2f} [{:.2f}, {:.2f}] ({:.1f} %)\n", m.label, width, m.median, m.ci.low,
                       m.ci.high, m.cv * 100);
  for (const auto& m : metrics)
    if (m.unstable)
      out += fmt::format("WARNING: {} varies between runs: CV {:.1f} % > {:.0f} % (per run: {})\n", m.label,
                         m.cv * 100, options.cv_warning * 100, fmt::join(m.per_run, ", "));
  if (runs < 3) out += "Note: fewer than 3 runs; the CI and CV say little\n";
  return out;
}

nlohmann::json repeat_json(const std::vector<RepeatedMetric>& metrics, std::size_t runs, const RepeatOptions& options) {
  nlohmann::json j = {{"runs", runs},
                      {"confidence", options.confidence},
                      {"resamples", options.resamples},
                      {"seed", options.seed},
                      {"cv_warning", options.cv_warning},
                      {"metrics", nlohmann::json::object()},
                      {"warnings", nlohmann::json::array()}};
  for (const auto& m : metrics) {
    j["metrics"][m.name] = {{"per_run", m.per_run}, {"median", m.median}, {"ci_low", m.ci.low},
                            {"ci_high", m.ci.high}, {"cv", m.cv},         {"unstable", m.unstable}};
    if (m.unstable) j["warnings"].push_back(fmt::format("{}: CV {:.1f} % > {:.0f} %", m.name, m.cv * 100, options.cv_warning * 100));
  }
  return j;
}

}  // namespace inferlab::lab
