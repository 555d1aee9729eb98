// The load generator's arrivals, request bodies, prompts and the registry of its datasets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/load_generator.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;

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

// --dataset NAME goes through one registry: its names are the CLI's choices, an unknown name and a
// dataset without its --dataset-path are errors naming the fix, and `random` gives random_prompts'
// prompts (its own default of 64 tokens when --output-len is not given).
TEST(Datasets, TheRegistryNamesChecksAndMakes) {
  auto error_of = [](const std::string& name, const DatasetRequest& request) {
    try {
      dataset_prompts(name, request);
    } catch (const inferlab::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("burstgpt", {.count = 1}).find("--dataset \"burstgpt\" is not a dataset (known: random, sharegpt-json, "),
            std::string::npos);
  EXPECT_NE(error_of("sharegpt-json", {.count = 1}).find("--dataset sharegpt-json needs --dataset-path FILE"), std::string::npos);
  const auto made = dataset_prompts("random", {.count = 3, .input_len = 12, .seed = 42});
  ASSERT_EQ(made.size(), 3u);
  EXPECT_EQ(made[2].text, random_prompts(3, 12, 64, 42, nullptr)[2].text);
  EXPECT_EQ(made[0].output_len, 64);
  EXPECT_EQ(dataset_prompts("random", {.count = 1, .input_len = 4, .output_len = 7, .seed = 1})[0].output_len, 7);
}

// A later turn of a conversation carries the exchanges before it, the answers as received.
TEST(LoadGenerator, LaterTurnsCarryTheHistory) {
  ServeOptions options;
  options.model = "m";
  BenchPrompt third{"and then?", std::nullopt, 8, 0, 3};
  const std::vector<ChatExchange> history{{"hello", "hi there"}, {"what is a KV cache?", "stored keys and values"}};
  auto body = nlohmann::json::parse(request_body(options, third, history));
  const nlohmann::json expected = nlohmann::json::parse(R"([
    {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": "what is a KV cache?"}, {"role": "assistant", "content": "stored keys and values"},
    {"role": "user", "content": "and then?"}])");
  EXPECT_EQ(body["messages"], expected);
  options.endpoint = "completions";
  EXPECT_THROW(request_body(options, third, history), inferlab::Error);
}

// The run refuses, before it sends anything, turns that are not consecutive and in order, and a
// conversation on the completions endpoint.
TEST(LoadGenerator, ConversationsMustBeInOrder) {
  ServeOptions options;
  options.base_url = "http://127.0.0.1:9";
  options.model = "m";
  auto error_of = [&](const std::vector<BenchPrompt>& prompts) {
    try {
      run_serve_benchmark(options, prompts);
    } catch (const inferlab::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of({{"a", std::nullopt, 4, 0, 1}, {"c", std::nullopt, 4, 0, 3}}).find("conversation 0: turn 3 does not follow its turn 2"),
            std::string::npos);
  EXPECT_NE(error_of({{"b", std::nullopt, 4, 0, 2}}).find("conversation 0: turn 2 does not follow"), std::string::npos);
  EXPECT_NE(error_of({{"a", std::nullopt, 4, 0, 1}, {"x", std::nullopt, 4, 1, 2}}).find("conversation 1: turn 2"),
            std::string::npos);
  options.endpoint = "completions";
  EXPECT_NE(error_of({{"a", std::nullopt, 4, 0, 1}}).find("multi-turn conversations need --endpoint chat"), std::string::npos);
}
