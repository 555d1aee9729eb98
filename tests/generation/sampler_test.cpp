// Sampler: deterministic checks on hand-made logits.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "inferlab/util/error.h"
#include "inferlab/generation/sampler.h"

using inferlab::Sampler;
using inferlab::SamplingParams;

namespace {

std::vector<float> logits_of_probabilities(std::vector<double> p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

SamplingParams sampling(float temperature, std::optional<uint64_t> seed = 7) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<int32_t> draw(Sampler& sampler, const std::vector<float>& logits, int count) {
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) out.push_back(sampler.sample(logits).token);
  return out;
}

}  // namespace

TEST(Sampler, TemperatureZeroIsArgmaxWithLowestIdOnTies) {
  Sampler sampler(sampling(0.0f));
  EXPECT_EQ(sampler.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}).token, 1);
  EXPECT_EQ(sampler.sample(std::vector<float>{5.0f, 1.0f, 5.0f}).token, 0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  auto logits = logits_of_probabilities({0.2, 0.2, 0.2, 0.2, 0.2});
  Sampler a(sampling(1.0f, 42)), b(sampling(1.0f, 42)), c(sampling(1.0f, 43));
  auto ta = draw(a, logits, 64), tb = draw(b, logits, 64), tc = draw(c, logits, 64);
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  auto logits = logits_of_probabilities({0.5, 0.3, 0.2});
  Sampler sampler(sampling(1.0f, 1));
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int32_t t : draw(sampler, logits, n)) ++counts[t];
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, TopKKeepsOnlyTheKMostLikely) {
  auto logits = logits_of_probabilities({0.1, 0.4, 0.15, 0.35});
  SamplingParams p = sampling(1.0f);
  p.top_k = 2;
  Sampler sampler(p);
  std::map<int32_t, int> counts;
  for (int32_t t : draw(sampler, logits, 4000)) ++counts[t];
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[1], counts[3]);
  EXPECT_GT(counts[3], 0);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // 0.5 + 0.3 >= 0.7: tokens 0 and 1 only.
  auto logits = logits_of_probabilities({0.5, 0.3, 0.15, 0.05});
  SamplingParams p = sampling(1.0f);
  p.top_p = 0.7f;
  Sampler sampler(p);
  std::map<int32_t, int> counts;
  for (int32_t t : draw(sampler, logits, 4000)) ++counts[t];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.5 / 0.8, 0.03);
}

TEST(Sampler, TopPOnALargeVocabularyMatchesTheSmallSetRule) {
  // 5000 tokens: the first try (top 2048) is not enough when p is near 1.
  std::vector<double> p(5000, 0.5 / 4999);
  p[1234] = 0.5;
  SamplingParams params = sampling(1.0f);
  params.top_p = 0.4f;
  Sampler sampler(params);
  for (int32_t t : draw(sampler, logits_of_probabilities(p), 200)) EXPECT_EQ(t, 1234);
  params.top_p = 0.99f;
  Sampler wide(params);
  std::map<int32_t, int> counts;
  for (int32_t t : draw(wide, logits_of_probabilities(p), 2000)) ++counts[t];
  EXPECT_GT(counts.size(), 100u);
}

TEST(Sampler, MinPDropsTokensFarBelowTheBest) {
  auto logits = logits_of_probabilities({0.6, 0.3, 0.05, 0.05});
  SamplingParams p = sampling(1.0f);
  p.min_p = 0.2f;  // floor 0.12
  Sampler sampler(p);
  std::map<int32_t, int> counts;
  for (int32_t t : draw(sampler, logits, 4000)) ++counts[t];
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 0);
}

TEST(Sampler, PenaltiesDiscourageRepeats) {
  std::vector<float> logits{2.0f, 1.9f, 1.8f};
  SamplingParams p = sampling(0.0f);
  p.presence_penalty = 0.5f;
  Sampler presence(p);
  EXPECT_EQ(draw(presence, logits, 3), (std::vector<int32_t>{0, 1, 2}));
  SamplingParams f = sampling(0.0f);
  f.frequency_penalty = 0.15f;
  Sampler frequency(f);
  // 2.0 -> 1.85 after one use (< 1.9); then 1.9 -> 1.75, so 0 (1.85) beats 2 (1.8)
  EXPECT_EQ(draw(frequency, logits, 3), (std::vector<int32_t>{0, 1, 0}));
  Sampler plain(sampling(0.0f));
  EXPECT_EQ(draw(plain, logits, 3), (std::vector<int32_t>{0, 0, 0}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  // transformers' RepetitionPenaltyLogitsProcessor: a seen token's logit / 2 when > 0, * 2 when not.
  SamplingParams p = sampling(0.0f);
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt{0, 3};
  // 0: 2.4 -> 1.2 (seen in the prompt), 1: 2.0 unseen, 3: -0.5 -> -1.0: 1 wins. Then 1 is seen
  // too (2.0 -> 1.0) and 0 (1.2) beats 2 (1.1); then 0, in the prompt and the output, is still
  // penalised once (1.2, not 0.6), so it wins again.
  Sampler sampler(p, prompt);
  EXPECT_EQ(draw(sampler, {2.4f, 2.0f, 1.1f, -0.5f}, 3), (std::vector<int32_t>{1, 0, 0}));
  // Off (1), the prompt changes nothing.
  Sampler off(sampling(0.0f), prompt);
  EXPECT_EQ(off.sample(std::vector<float>{2.4f, 2.0f, 1.1f, -0.5f}).token, 0);
  SamplingParams bad = sampling(0.0f);
  bad.repetition_penalty = 0.0f;
  EXPECT_THROW(Sampler{bad}, inferlab::Error);
}

TEST(Sampler, MinTokensHoldsBackTheStopIdsUntilThatManyTokens) {
  SamplingParams p = sampling(0.0f);
  p.min_tokens = 2;
  const std::vector<int32_t> stop{2};
  Sampler sampler(p, {}, stop);
  const std::vector<float> logits{1.0f, 0.5f, 9.0f};  // the stop id 2 is the most likely
  EXPECT_EQ(draw(sampler, logits, 3), (std::vector<int32_t>{0, 0, 2}));
  // Sampled (not greedy) alike: never the stop id while held back.
  SamplingParams t = sampling(1.0f);
  t.min_tokens = 50;
  t.seed = 3;
  Sampler sampled(t, {}, stop);
  for (int32_t token : draw(sampled, logits, 50)) EXPECT_NE(token, 2);
}

TEST(Sampler, LogitBiasCanForceAToken) {
  SamplingParams p = sampling(0.0f);
  p.logit_bias[2] = 100.0f;
  Sampler sampler(p);
  EXPECT_EQ(sampler.sample(std::vector<float>{5.0f, 1.0f, 0.0f}).token, 2);
}

TEST(Sampler, LogprobsAreLogSoftmaxOfTheModelsLogits) {
  SamplingParams p = sampling(0.0f);
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler sampler(p);
  auto result = sampler.sample(logits_of_probabilities({0.1, 0.6, 0.3}));
  EXPECT_EQ(result.token, 1);
  EXPECT_NEAR(result.logprob, std::log(0.6), 1e-5);
  ASSERT_EQ(result.top.size(), 2u);
  EXPECT_EQ(result.top[0].token, 1);
  EXPECT_EQ(result.top[1].token, 2);
  EXPECT_NEAR(result.top[1].logprob, std::log(0.3), 1e-5);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, inferlab::Error);
  p = {};
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, inferlab::Error);
}

TEST(Sampler, VocabLimitKeepsPaddedIdsOut) {
  // The padded rows (ids 3, 4) have the highest logits; the tokenizer knows only 0..2.
  std::vector<float> logits{1.0f, 2.0f, 0.5f, 9.0f, 8.0f};
  SamplingParams greedy = sampling(0.0f);
  greedy.vocab_limit = 3;
  greedy.top_logprobs = 5;
  Sampler g(greedy);
  auto result = g.sample(logits);
  EXPECT_EQ(result.token, 1);
  EXPECT_EQ(result.top.size(), 3u);
  SamplingParams random = sampling(1.0f);
  random.vocab_limit = 3;
  Sampler r(random);
  for (int32_t t : draw(r, logits, 500)) EXPECT_LT(t, 3);
}
