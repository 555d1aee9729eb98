// inferlab._core (see bindings.h): the measurement lab's pure functions (report of a requests.csv,
// compare of two runs) and the KV-size formula, each returning what `inferlab report --json`,
// `report --compare --json` and `inferlab kv-size` compute.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "inferlab/lab/compare.h"
#include "inferlab/lab/metrics.h"
#include "inferlab/model/config.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/util/stats.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace inferlab::python {
namespace {

std::string report(const std::string& csv, const std::string& slo, const std::string& percentiles) {
  const lab::Slo objectives = slo.empty() ? lab::Slo{} : lab::parse_slo(slo);
  const lab::Summary summary = lab::summarize(lab::read_requests_csv(csv), objectives, parse_percentile_method(percentiles));
  return lab::summary_json(summary).dump();
}

lab::CompareOptions compare_options(uint64_t seed, int resamples) {
  lab::CompareOptions options;
  options.seed = seed;
  options.resamples = resamples;
  return options;
}

std::string compare_csv(const std::string& a, const std::string& b, uint64_t seed, int resamples) {
  const lab::CompareOptions options = compare_options(seed, resamples);
  const auto rows = lab::compare_runs(lab::read_requests_csv(a), lab::read_requests_csv(b), options);
  return lab::comparison_json(rows, a, b, options, false).dump();
}

// Two `bench serve --repeat` summaries, given as their JSON text and their names.
std::string compare_summaries(const std::string& a_json, const std::string& b_json, const std::string& a,
                              const std::string& b, uint64_t seed, int resamples) {
  const lab::CompareOptions options = compare_options(seed, resamples);
  const auto rows = lab::compare_repeated(nlohmann::json::parse(a_json), nlohmann::json::parse(b_json), a, b, options);
  return lab::comparison_json(rows, a, b, options, true).dump();
}

}  // namespace

void bind_lab(nb::module_& m) {
  m.def("report", &report, "csv"_a, "slo"_a, "percentiles"_a, nb::call_guard<nb::gil_scoped_release>());
  m.def("compare_csv", &compare_csv, "a"_a, "b"_a, "seed"_a, "resamples"_a, nb::call_guard<nb::gil_scoped_release>());
  m.def("compare_summaries", &compare_summaries, "a_json"_a, "b_json"_a, "a"_a, "b"_a, "seed"_a, "resamples"_a,
        nb::call_guard<nb::gil_scoped_release>());
  m.def("kv_dtype_bytes", &kv_dtype_bytes, "dtype"_a);  // `inferlab kv-size --dtype`'s rule
  m.def("kv_bytes_per_token", [](int layers, int kv_heads, int head_dim, std::size_t element_bytes) {
    return kv_bytes_per_token(layers, kv_heads, head_dim, element_bytes);
  }, "layers"_a, "kv_heads"_a, "head_dim"_a, "element_bytes"_a);
  m.def("kv_shape", [](const std::string& model) {
    const ModelConfig config = read_model_config(model);
    return std::make_tuple(config.num_layers, config.num_kv_heads, config.head_dim);
  }, "model"_a);
}

}  // namespace inferlab::python
