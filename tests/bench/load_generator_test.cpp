// The load generator's arrivals, request bodies and prompts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/bench/load_generator.h"

using namespace inferlab::bench;

TEST(LoadGenerator, ArrivalsArePoissonWithTheGivenRate) {
  auto offsets = arrival_offsets(20000, 50.0, 1.0, 1);
  EXPECT_EQ(offsets[0], 0);
  for (std::size_t i = 1; i < offsets.size(); ++i) ASSERT_GE(offsets[i], offsets[i - 1]);
  double mean_gap = offsets.back() / (offsets.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 50, 0.001);
  // Poisson gaps: standard deviation equals the mean; burstiness 4 makes them regular (cv 0.5).
  auto cv = [](const std::vector<double>& t) {
    double mean = t.back() / (t.size() - 1), var = 0;
    for (std::size_t i = 1; i < t.size(); ++i) var += (t[i] - t[i - 1] - mean) * (t[i] - t[i - 1] - mean);
    return std::sqrt(var / (t.size() - 1)) / mean;
  };
  EXPECT_NEAR(cv(offsets), 1.0, 0.05);
  EXPECT_NEAR(cv(arrival_offsets(20000, 50.0, 4.0, 1)), 0.5, 0.03);
  EXPECT_EQ(arrival_offsets(3, 0, 1, 1), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(arrival_offsets(50, 10, 1, 7), arrival_offsets(50, 10, 1, 7));  // seeded
}

TEST(LoadGenerator, RequestBodiesAskForUsage) {
  ServeOptions options;
  options.model = "m";
  options.ignore_eos = true;
  BenchPrompt prompt{"hello", std::nullopt, 16};
  auto chat = nlohmann::json::parse(request_body(options, prompt));
  EXPECT_EQ(chat["messages"][0]["content"], "hello");
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);
  EXPECT_EQ(chat["max_tokens"], 16);
  EXPECT_EQ(chat["ignore_eos"], true);
  options.endpoint = "completions";
  EXPECT_EQ(nlohmann::json::parse(request_body(options, prompt))["prompt"], "hello");
  auto words = random_prompts(3, 12, 5, 42, nullptr);
  EXPECT_EQ(std::count(words[0].text.begin(), words[0].text.end(), ' '), 11);
  EXPECT_EQ(random_prompts(3, 12, 5, 42, nullptr)[2].text, words[2].text);
}
