// Prompt-lookup drafting and the verification rule on hand-made inputs (the scheduler and
// greedy generation with speculation run on a real model in scheduler_test.cpp).
#include "inferlab/generation/speculative_decoding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "inferlab/util/error.h"

using namespace inferlab;

namespace {

SpeculativeOptions ngram(int draft_max, int ngram_max = 3, int ngram_min = 1) {
  SpeculativeOptions o;
  o.method = "ngram";
  o.draft_max = draft_max;
  o.ngram_max = ngram_max;
  o.ngram_min = ngram_min;
  return o;
}

std::vector<float> log_probabilities(std::vector<double> p) {
  std::vector<float> out;
  for (double x : p) out.push_back(static_cast<float>(std::log(x)));
  return out;
}

}  // namespace

TEST(NgramDraft, ProposesWhatFollowedTheLongestMatchingSuffix) {
  // "1 2 3" occurred before, followed by 4 5 6; "3" alone last occurred before 9.
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 3, 9, 1, 2, 3};
  EXPECT_EQ(ngram_draft(tokens, ngram(3), 99), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(ngram_draft(tokens, ngram(8), 2), (std::vector<int32_t>{4, 5}));  // the caller's limit
  EXPECT_EQ(ngram_draft(tokens, ngram(3, 1, 1), 99), (std::vector<int32_t>{9, 1, 2}));  // unigram: the most recent "3"
  EXPECT_TRUE(ngram_draft(tokens, ngram(3), 0).empty());
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 3, 4}, ngram(3), 8).empty());  // nothing repeats
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{7}, ngram(3), 8).empty());
  // A run finds itself one token back; an earlier occurrence with a whole draft after it wins.
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{5, 5, 5, 5}, ngram(4), 8), (std::vector<int32_t>{5}));
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{8, 1, 2, 3, 8, 8}, ngram(8, 1, 1), 8), (std::vector<int32_t>{1, 2, 3, 8, 8}));
}

TEST(NgramDraft, OptionsAreChecked) {
  EXPECT_NO_THROW(validate(SpeculativeOptions{}));
  EXPECT_THROW(validate(SpeculativeOptions{.method = "eagle"}), Error);
  EXPECT_THROW(validate(ngram(0)), Error);
  EXPECT_THROW(validate(ngram(4, 1, 2)), Error);
  EXPECT_THROW(validate(ngram(4, 3, 0)), Error);
}

TEST(VerifyDraft, GreedyKeepsTheArgmaxPrefixThenTheModelsToken) {
  Sampler sampler(SamplingParams{.temperature = 0.0f});
  // Rows after [last], [last, 2], [last, 2, 0]: argmax 2, 0, 1.
  std::vector<float> rows = {0, 1, 5, 0, /**/ 9, 1, 2, 0, /**/ 0, 7, 1, 2};
  DraftOutcome all_but_last = verify_draft(sampler, rows.data(), 4, std::vector<int32_t>{2, 0});
  ASSERT_EQ(all_but_last.emitted.size(), 3u);  // both drafts kept + the bonus token from the last row
  EXPECT_EQ(all_but_last.accepted, 2);
  EXPECT_EQ(all_but_last.emitted[2].token, 1);
  DraftOutcome refused = verify_draft(sampler, rows.data(), 4, std::vector<int32_t>{2, 3});
  ASSERT_EQ(refused.emitted.size(), 2u);  // 2 kept, 3 refused: the model's 0 instead, then stop
  EXPECT_EQ(refused.accepted, 1);
  EXPECT_EQ(refused.emitted[1].token, 0);
}

// The rule's point: whatever the draft, the emitted token is distributed as plain sampling.
TEST(VerifyDraft, SamplingLeavesTheDistributionUnchanged) {
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  const std::vector<float> logits = log_probabilities(p);
  const int n = 40000;
  for (int32_t draft : {0, 1, 3}) {
    Sampler sampler(SamplingParams{.temperature = 1.0f, .seed = 11u + draft});
    std::map<int32_t, int> counts;
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      bool ok = false;
      ++counts[sampler.verify(logits, draft, ok).token];
      accepted += ok;
    }
    EXPECT_NEAR(accepted / double(n), p[draft], 0.01) << "acceptance is p(draft)";
    for (int32_t t = 0; t < 4; ++t) EXPECT_NEAR(counts[t] / double(n), p[t], 0.01) << "draft " << draft << " token " << t;
  }
  // With top-k 2 the distribution is the renormalised top two; a draft outside it is never kept.
  Sampler top_k(SamplingParams{.temperature = 1.0f, .top_k = 2, .seed = 5});
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    bool ok = true;
    ++counts[top_k.verify(logits, 2, ok).token];
    EXPECT_FALSE(ok);
  }
  EXPECT_NEAR(counts[0] / double(n), 0.5 / 0.8, 0.01);
  EXPECT_NEAR(counts[1] / double(n), 0.3 / 0.8, 0.01);
  EXPECT_EQ(counts[2] + counts[3], 0);
}
