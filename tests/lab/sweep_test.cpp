#include "inferlab/lab/sweep.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Sweep, SplitsArgumentsLikeAShell) {
  EXPECT_EQ(split_args("  --max-batch 4\t--served-model-name 'a b' --x \"q\\\"uote\" c\\ d ''", "--serve-args"),
            (std::vector<std::string>{"--max-batch", "4", "--served-model-name", "a b", "--x", "q\"uote", "c d", ""}));
  EXPECT_TRUE(split_args("   ", "--serve-args").empty());
  EXPECT_NE(error_of([] { split_args("--a 'open", "--serve-args"); }).find("--serve-args '--a 'open': a single quote is never closed"),
            std::string::npos);
  EXPECT_EQ(variant_name({"--max-batch", "4", "--weights", "q4"}), "max-batch-4-weights-q4");
  EXPECT_EQ(variant_name({}), "default");
}

TEST(Sweep, ReadsVllmServeParams) {
  const auto path = std::filesystem::temp_directory_path() / "inferlab_sweep_params.json";
  std::ofstream(path) << R"([{"max_batch": 4, "prefix_caching": false}, {"_benchmark_name": "big", "max_batch": 16, "weights": "q4", "log_requests": true}])";
  const auto v = read_serve_params(path);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].args, (std::vector<std::string>{"--max-batch", "4", "--no-prefix-caching"}));
  EXPECT_EQ(v[0].name, "max-batch-4-no-prefix-caching");
  EXPECT_EQ(v[1].name, "big");
  EXPECT_EQ(v[1].args, (std::vector<std::string>{"--log-requests", "--max-batch", "16", "--weights", "q4"}));
  std::ofstream(path) << R"({"small": {"max_batch": 1}, "large": {"max_batch": [1]}})";
  EXPECT_NE(error_of([&] { read_serve_params(path); }).find("max_batch is neither a string, a number nor a boolean"), std::string::npos);
  std::ofstream(path) << "[1]";
  EXPECT_NE(error_of([&] { read_serve_params(path); }).find("item 1 is not an object"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Sweep, RefusesFlagsTheSweepSetsItself) {
  SweepOptions o;
  o.serve = {{"a", {"--port", "9"}}};
  EXPECT_NE(error_of([&] { check_sweep_args(o); }).find("--serve-args must not set --port"), std::string::npos);
  o.serve = {{"a", {"--host=0.0.0.0"}}};
  EXPECT_NE(error_of([&] { check_sweep_args(o); }).find("must not set --host"), std::string::npos);
  o.serve = {{"a", {}}};
  o.bench_args = {"--num-requests", "4", "--output", "x.csv"};
  EXPECT_NE(error_of([&] { check_sweep_args(o); }).find("--bench-args must not set --output"), std::string::npos);
  o.bench_args = {"--request-rate", "2"};
  EXPECT_NE(error_of([&] { check_sweep_args(o); }).find("the load is the sweep's own axis"), std::string::npos);
  o.bench_args = {"--num-requests", "4"};
  o.serve = {{"same", {}}, {"same", {"--max-batch", "2"}}};
  EXPECT_NE(error_of([&] { check_sweep_args(o); }).find("both named 'same'"), std::string::npos);
  o.serve = {{"a", {}}, {"b", {"--max-batch", "2"}}};
  EXPECT_EQ(error_of([&] { check_sweep_args(o); }), "");
}

TEST(Sweep, ParetoFrontierKeepsTheUndominated) {
  // (tokens/s per user, tokens/s): low concurrency is fast per user, high concurrency gives throughput.
  const std::vector<std::pair<double, double>> p = {{50, 50}, {30, 120}, {20, 100}, {10, 160}, {30, 120}, {5, 150}};
  EXPECT_EQ(pareto_frontier(p), (std::vector<bool>{true, true, false, true, true, false}));  // ties both stay
  EXPECT_TRUE(pareto_frontier({}).empty());
  EXPECT_EQ(pareto_frontier({{1, 1}}), std::vector<bool>{true});
}

}  // namespace
}  // namespace inferlab::lab
