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

// --- typical_p, XTC, DRY (llama.cpp's and transformers' meanings; the exact comparisons with
// their implementations are sampler_vs_llama_cpp and sampler_typical_p_vs_transformers).

namespace {

double total_variation(const std::vector<double>& p, const std::map<int32_t, int>& counts, int n) {
  double tv = 0.0;
  for (std::size_t id = 0; id < p.size(); ++id) {
    auto it = counts.find(static_cast<int32_t>(id));
    tv += std::abs(p[id] - (it == counts.end() ? 0.0 : it->second / double(n)));
  }
  return tv / 2.0;
}

SamplingParams dry(float multiplier, float base, int allowed_length, std::vector<inferlab::DryBreaker> breakers = {}) {
  SamplingParams p = sampling(1.0f);
  p.dry_multiplier = multiplier;
  p.dry_base = base;
  p.dry_allowed_length = allowed_length;
  p.dry_breakers = std::move(breakers);
  return p;
}

}  // namespace

TEST(Sampler, NewParametersAtTheirDefaultsOrOffChangeNothing) {
  auto logits = logits_of_probabilities({0.35, 0.25, 0.2, 0.1, 0.06, 0.04});
  const std::vector<int32_t> prompt = {0, 1, 2, 0, 1, 2, 0, 1};
  Sampler plain(sampling(1.0f, 5), prompt);
  SamplingParams off = sampling(1.0f, 5);
  off.typical_p = 1.0f;
  off.xtc_probability = 0.0f;  // off: no coin
  off.dry_multiplier = 0.0f;   // off, whatever the rest
  off.dry_breakers = {{1, {}}};
  Sampler with_off(off, prompt);
  SamplingParams xtc_disabled = sampling(1.0f, 5);
  xtc_disabled.xtc_probability = 1.0f;
  xtc_disabled.xtc_threshold = 0.51f;  // above 0.5: off (llama.cpp)
  SamplingParams dry_base_below_one = dry(1.0f, 0.9f, 0);  // base < 1: off (llama.cpp)
  dry_base_below_one.seed = 5;
  Sampler xtc_off(xtc_disabled, prompt), dry_off(dry_base_below_one, prompt);
  const auto expected = draw(plain, logits, 200);
  EXPECT_EQ(draw(with_off, logits, 200), expected);
  EXPECT_EQ(draw(xtc_off, logits, 200), expected);
  EXPECT_EQ(draw(dry_off, logits, 200), expected);
  Sampler fresh(sampling(1.0f, 5));
  const auto p = fresh.distribution(logits);
  EXPECT_NEAR(p[0], 0.35, 1e-6);
  EXPECT_NEAR(p[5], 0.04, 1e-6);
}

TEST(Sampler, TypicalPKeepsTheTokensNearestTheEntropyUntilTheMassIsReached) {
  // p = .5 .3 .1 .1: H = 1.168 nats; |-log p - H| = .475 .036 1.134 1.134, so token 1 comes first,
  // then token 0, then 2 and 3 tied.
  auto logits = logits_of_probabilities({0.5, 0.3, 0.1, 0.1});
  SamplingParams p = sampling(1.0f);
  p.typical_p = 0.25f;  // token 1 alone reaches it: the most likely token is dropped
  EXPECT_EQ(Sampler(p).distribution(logits), (std::vector<double>{0.0, 1.0, 0.0, 0.0}));
  p.typical_p = 0.5f;
  auto kept = Sampler(p).distribution(logits);
  EXPECT_NEAR(kept[0], 0.625, 1e-6);
  EXPECT_NEAR(kept[1], 0.375, 1e-6);
  EXPECT_EQ(kept[2] + kept[3], 0.0);
  p.typical_p = 0.85f;  // reached at token 2; token 3 is tied with it and stays (transformers' rule)
  kept = Sampler(p).distribution(logits);
  EXPECT_NEAR(kept[2], 0.1, 1e-6);
  EXPECT_NEAR(kept[3], 0.1, 1e-6);
  // min-p after typical-p is relative to the best token still in (token 0 is gone).
  p.typical_p = 0.25f;
  p.min_p = 0.7f;  // 0.3 / 0.5 = 0.6 < 0.7 relative to token 0, but token 1 is the best left
  EXPECT_EQ(Sampler(p).distribution(logits), (std::vector<double>{0.0, 1.0, 0.0, 0.0}));
}

TEST(Sampler, TypicalPSeededDrawsFollowItsDistribution) {
  std::vector<double> probabilities;
  for (int i = 0; i < 12; ++i) probabilities.push_back(std::exp(-0.4 * i));
  double sum = 0.0;
  for (double x : probabilities) sum += x;
  for (double& x : probabilities) x /= sum;
  auto logits = logits_of_probabilities(probabilities);
  SamplingParams p = sampling(0.9f, 11);
  p.typical_p = 0.6f;
  Sampler sampler(p);
  const auto expected = sampler.distribution(logits);
  std::size_t kept = 0;
  for (double x : expected) kept += x > 0.0;
  ASSERT_GT(kept, 2u);
  ASSERT_LT(kept, expected.size());
  const int n = 40000;
  std::map<int32_t, int> counts;
  for (int32_t t : draw(sampler, logits, n)) ++counts[t];
  for (const auto& [token, count] : counts) EXPECT_GT(expected[token], 0.0) << "token " << token << " is filtered out";
  // With 40000 draws over <= 12 tokens the total variation distance is about 0.01 at most.
  EXPECT_LT(total_variation(expected, counts, n), 0.015);
}

TEST(Sampler, XtcRemovesAllTopChoicesButTheLeastLikelyOfThem) {
  auto logits = logits_of_probabilities({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = sampling(1.0f);
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.15f;  // tokens 0, 1, 2 reach it: 2 stays
  auto kept = Sampler(p).distribution(logits);
  EXPECT_EQ(kept[0] + kept[1], 0.0);
  EXPECT_NEAR(kept[2], 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(kept[3], 1.0 / 3.0, 1e-6);
  p.xtc_threshold = 0.35f;  // only token 0 reaches it: nothing goes
  EXPECT_NEAR(Sampler(p).distribution(logits)[0], 0.4, 1e-6);
  p.xtc_threshold = 0.0f;  // everything reaches 0: only the least likely stays
  EXPECT_EQ(Sampler(p).distribution(logits), (std::vector<double>{0.0, 0.0, 0.0, 1.0}));
  p.top_k = 1;  // one candidate: nothing to exclude
  EXPECT_EQ(Sampler(p).distribution(logits), (std::vector<double>{1.0, 0.0, 0.0, 0.0}));
}

TEST(Sampler, XtcAppliesWithItsProbabilityPerToken) {
  auto logits = logits_of_probabilities({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = sampling(1.0f, 3);
  p.xtc_probability = 0.5f;
  p.xtc_threshold = 0.15f;
  Sampler sampler(p);
  const int n = 20000;
  std::map<int32_t, int> counts;
  for (int32_t t : draw(sampler, logits, n)) ++counts[t];
  // Half the time the plain distribution, half the time {2: 2/3, 3: 1/3}.
  EXPECT_NEAR(counts[0] / double(n), 0.5 * 0.4, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.5 * 0.3, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.5 * 0.2 + 0.5 * 2.0 / 3.0, 0.015);
  EXPECT_NEAR(counts[3] / double(n), 0.5 * 0.1 + 0.5 * 1.0 / 3.0, 0.015);
}

TEST(Sampler, DryPenalisesTheTokenThatWouldExtendARepeat) {
  // a b c d a b c: "a b c" was followed by d, so d would make a repeat of 4 (3 > allowed 2).
  const std::vector<int32_t> history = {1, 2, 3, 4, 1, 2, 3};
  const std::vector<float> zeros(6, 0.0f);
  Sampler plain(dry(1.0f, 2.0f, 2), history);
  EXPECT_EQ(plain.adjusted_logits(zeros), (std::vector<float>{0, 0, 0, 0, -2.0f, 0}));  // 1 * 2^(3-2)
  Sampler longer_allowed(dry(1.0f, 2.0f, 3), history);
  EXPECT_EQ(longer_allowed.adjusted_logits(zeros), (std::vector<float>{0, 0, 0, 0, -1.0f, 0}));  // 2^0
  Sampler too_short(dry(1.0f, 2.0f, 4), history);
  EXPECT_EQ(too_short.adjusted_logits(zeros), zeros);
  // A breaker inside the repeat caps it: b (one token) or "b c" (head b, tail c) just before the end.
  Sampler broken_by_b(dry(1.0f, 2.0f, 2, {{2, {}}}), history);
  EXPECT_EQ(broken_by_b.adjusted_logits(zeros), zeros);
  Sampler broken_by_b_c(dry(1.0f, 2.0f, 2, {{2, {3}}}), history);
  EXPECT_EQ(broken_by_b_c.adjusted_logits(zeros), zeros);
  Sampler b_then_a(dry(1.0f, 2.0f, 2, {{2, {1}}}), history);  // "b a" never occurs: no effect
  EXPECT_EQ(b_then_a.adjusted_logits(zeros)[4], -2.0f);
  // A one-token breaker is never penalised itself.
  Sampler d_breaks(dry(1.0f, 2.0f, 2, {{4, {}}}), history);
  EXPECT_EQ(d_breaks.adjusted_logits(zeros), zeros);
  // The window is the last dry_penalty_last_n tokens: 4 of them hold no repeat of 3.
  SamplingParams last_four = dry(1.0f, 2.0f, 2);
  last_four.dry_penalty_last_n = 4;
  EXPECT_EQ(Sampler(last_four, history).adjusted_logits(zeros), zeros);
}

TEST(Sampler, DryCountsTheOutputAndSteersGreedyToo) {
  // Greedy would repeat "1 2" forever; DRY makes the continuation costlier each time.
  SamplingParams p = dry(3.0f, 1.75f, 2);
  p.temperature = 0.0f;
  Sampler sampler(p, std::vector<int32_t>{1, 2, 1, 2});
  std::vector<float> favour_1 = {0.0f, 1.0f, 0.5f, 0.2f};
  EXPECT_NE(sampler.sample(favour_1).token, 1);
  SamplingParams off = p;
  off.dry_multiplier = 0.0f;
  EXPECT_EQ(Sampler(off, std::vector<int32_t>{1, 2, 1, 2}).sample(favour_1).token, 1);
  // Long repeats cap the exponent where base^exponent would overflow: finite logits.
  std::vector<int32_t> long_repeat;
  for (int i = 0; i < 300; ++i) long_repeat.push_back(1 + i % 2);
  SamplingParams steep = dry(1.0f, 3.0f, 0);
  steep.dry_penalty_last_n = 1000;
  const auto adjusted = Sampler(steep, long_repeat).adjusted_logits(favour_1);
  EXPECT_TRUE(std::isfinite(adjusted[1]));
  EXPECT_LT(adjusted[1], -1e30f);
}

TEST(Sampler, DryBreakerSequencesFollowLlamaCppTokenTextRule) {
  const std::vector<std::string> texts = {"a", "\n", "x\ny", "He", "llo", "Hel", "lo", " world", "Hello"};
  auto text = [&](int32_t id) { return texts[static_cast<std::size_t>(id)]; };
  auto tokenize = [&](const std::string& s) -> std::vector<int32_t> {
    if (s == "llo") return {4};
    if (s == "lo") return {6};
    if (s == "ello") return {8, 8};  // never needed: no token ends with a bare "H"
    return {};
  };
  auto breakers = inferlab::dry_breaker_sequences({"\n", "Hello", ""}, static_cast<int>(texts.size()), text, tokenize);
  const std::vector<inferlab::DryBreaker> expected = {{1, {}}, {2, {}}, {3, {4}}, {5, {6}}, {8, {}}};
  EXPECT_EQ(breakers, expected);
}

TEST(Sampler, RejectsOutOfRangeTypicalXtcAndDryParameters) {
  auto refused = [](auto change) {
    SamplingParams p = sampling(1.0f);
    change(p);
    EXPECT_THROW(Sampler{p}, inferlab::Error);
  };
  refused([](SamplingParams& p) { p.typical_p = 0.0f; });
  refused([](SamplingParams& p) { p.typical_p = 1.5f; });
  refused([](SamplingParams& p) { p.typical_p = NAN; });
  refused([](SamplingParams& p) { p.xtc_probability = -0.1f; });
  refused([](SamplingParams& p) { p.xtc_probability = 1.1f; });
  refused([](SamplingParams& p) { p.xtc_threshold = 1.5f; });
  refused([](SamplingParams& p) { p.dry_multiplier = -1.0f; });
  refused([](SamplingParams& p) { p.dry_multiplier = INFINITY; });
  refused([](SamplingParams& p) { p.dry_base = -1.0f; });
  refused([](SamplingParams& p) { p.dry_allowed_length = -1; });
  refused([](SamplingParams& p) { p.dry_penalty_last_n = -1; });
}
