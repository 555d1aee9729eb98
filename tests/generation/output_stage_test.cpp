// The output stage alone (no model): sampled tokens are streamed until a stop id, max_tokens or
// the end of a draft; ended sequences get their last event with timings, give their KV blocks
// back and are counted in the stats.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>

#include "generation/output_stage.h"
#include "inferlab/grammar/grammar.h"
#include "inferlab/model/config.h"

using namespace inferlab;

namespace {

class OutputStageTest : public ::testing::Test {
 protected:
  OutputStageTest() : cache_(tiny_config(), 16 * 4, 4), kv_(cache_, true), output_(0, kv_, mutex_, stats_) {}

  static ModelConfig tiny_config() {
    ModelConfig config;
    config.num_layers = 1;
    config.num_kv_heads = 1;
    config.head_dim = 8;
    return config;
  }
  // A sequence whose prompt is computed, as the planner and runner leave it.
  std::unique_ptr<Sequence> computed(int max_tokens, std::vector<int32_t> stop_ids = {}) {
    GenerationRequest request;
    request.prompt = {3, 4, 5};
    request.max_tokens = max_tokens;
    request.stop_token_ids = std::move(stop_ids);
    auto seq = std::make_unique<Sequence>(std::move(request));
    seq->stream = std::make_shared<RequestStream>();
    seq->tokens = seq->request.prompt;
    seq->submitted = Clock::now();
    EXPECT_TRUE(kv_.reserve(seq->kv, 3));
    seq->kv.length = 3;
    return seq;
  }
  static SampledChunk tokens(std::vector<int32_t> ids) {
    SampledChunk chunk;
    for (int32_t id : ids) chunk.tokens.push_back(SampledToken{id, 0.0f, {}});
    return chunk;
  }
  static std::vector<StreamEvent> events(Sequence& seq) { return seq.stream->wait(std::chrono::milliseconds(0)); }

  KVCache cache_;
  KVPrefixManager kv_;
  std::mutex mutex_;
  SchedulerStats stats_;
  OutputStage output_;
};

}  // namespace

TEST_F(OutputStageTest, AStopIdEndsWithStopAndMaxTokensWithLength) {
  auto stopping = computed(8, {2});
  auto limited = computed(1);
  StepPlan plan;
  plan.decoding = 2;
  output_.begin_step(Clock::now());
  output_.take(*stopping, tokens({2}));
  output_.take(*limited, tokens({9}));
  const std::vector<Sequence*> ended = output_.end_step(plan);
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[0], stopping.get());
  EXPECT_EQ(ended[1], limited.get());

  std::vector<StreamEvent> got = events(*stopping);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].token);
  EXPECT_EQ(got[0].token->token, 2) << "the stop token is streamed, then the finish";
  ASSERT_TRUE(got[1].finish);
  EXPECT_EQ(*got[1].finish, FinishReason::stop);
  ASSERT_TRUE(got[1].timings);
  EXPECT_EQ(got[1].timings->generated_tokens, 1);
  got = events(*limited);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(*got[1].finish, FinishReason::length);

  EXPECT_EQ(kv_.free_blocks(), kv_.num_blocks()) << "finished sequences gave their blocks back";
  EXPECT_EQ(stats_.steps, 1u);
  EXPECT_EQ(stats_.generation_tokens, 2u);
  EXPECT_EQ(stats_.batched_decode_steps, 1u);
  EXPECT_EQ(stats_.requests_finished[static_cast<int>(FinishReason::stop)], 1u);
  EXPECT_EQ(stats_.requests_finished[static_cast<int>(FinishReason::length)], 1u);
}

TEST_F(OutputStageTest, AVerifiedDraftIsStreamedUpToItsStop) {
  auto seq = computed(8, {2});
  SampledChunk chunk = tokens({5, 2, 7});
  chunk.drafted = 3;
  chunk.accepted = 2;
  StepPlan plan;
  plan.decoding = 1;
  output_.begin_step(Clock::now());
  output_.take(*seq, std::move(chunk));
  EXPECT_EQ(output_.end_step(plan).size(), 1u);
  std::vector<StreamEvent> got = events(*seq);
  ASSERT_EQ(got.size(), 3u) << "5, the stop 2, the finish; 7 after the stop is dropped";
  EXPECT_EQ(got[1].token->token, 2);
  EXPECT_EQ(*got[2].finish, FinishReason::stop);
  EXPECT_EQ(got[2].timings->draft_tokens, 3);
  EXPECT_EQ(got[2].timings->accepted_draft_tokens, 2);
  EXPECT_EQ(stats_.draft_tokens, 3u);
  EXPECT_EQ(stats_.accepted_draft_tokens, 2u);
}

TEST_F(OutputStageTest, AnUnfinishedSequenceStreamsItsTokenAndRuns) {
  auto seq = computed(8);
  StepPlan plan;
  output_.begin_step(Clock::now());
  output_.take(*seq, tokens({11}));
  EXPECT_TRUE(output_.end_step(plan).empty());
  EXPECT_EQ(seq->generated, 1);
  EXPECT_EQ(seq->tokens.back(), 11);
  EXPECT_TRUE(seq->first_token);
  EXPECT_EQ(events(*seq).size(), 1u);
}

namespace {

// Tokens 0..5 of a tiny vocabulary; 6 is a special end marker with no bytes (as in a tokenizer
// that marks </think> special); 7 and 8 harmony's special <|channel|> and <|message|>, 9 and 10
// channel names.
enum : int32_t { kThink, kEndThink, kOpen, kClose, kX, kSpace, kSpecialEnd, kChannel, kMessage, kFinal, kAnalysis };
std::shared_ptr<CompiledGrammar> empty_object_grammar() {
  auto vocabulary = std::make_shared<TokenVocabulary>(std::vector<std::string>{"<think>", "</think>", "{", "}", "x", " ", "", "", "", "final", "analysis"});
  return std::make_shared<CompiledGrammar>(parse_gbnf("root ::= \"{}\""), vocabulary);
}

}  // namespace

// A thinking model's grammar waits while the output may open its reasoning, and while it is
// inside; it applies from the end marker on (found by its text, or by its id when it has none).
TEST_F(OutputStageTest, TheGrammarStartsWhereTheReasoningEnds) {
  struct Case {
    const char* what;
    GenerationRequest::ReasoningSpan span;
    std::vector<int32_t> tokens;
    FinishReason finish;
  };
  const Case cases[] = {
      {"opened by the output", {.open = false, .start_token = kThink, .end = "</think>"}, {kThink, kX, kOpen, kEndThink, kOpen, kClose}, FinishReason::stop},
      {"opened by the prompt", {.open = true, .start_token = -1, .end = "</think>"}, {kX, kSpace, kEndThink, kOpen, kClose}, FinishReason::stop},
      {"closed by a special token", {.open = true, .start_token = -1, .end = "</think>", .end_token = kSpecialEnd}, {kX, kSpecialEnd, kOpen, kClose}, FinishReason::stop},
      {"not opened: the grammar from the first token", {.open = false, .start_token = kThink, .end = "</think>"}, {kX}, FinishReason::error},
      {"a grammar token inside the thoughts ends nothing", {.open = true, .start_token = -1, .end = "</think>"}, {kOpen, kClose, kX}, FinishReason::length},
      // Harmony (gpt-oss): <|channel|> (kChannel) and <|message|> (kMessage) are special tokens with no
      // bytes; the grammar starts in the body of the message whose header names the final channel.
      {"harmony: analysis, then the final channel", {.open = true, .start_token = -1, .end = "final", .end_token = kMessage, .header_token = kChannel},
       {kChannel, kAnalysis, kMessage, kOpen, kX, kSpecialEnd, kChannel, kFinal, kMessage, kOpen, kClose}, FinishReason::stop},
      {"harmony: another channel's body is free", {.open = true, .start_token = -1, .end = "final", .end_token = kMessage, .header_token = kChannel},
       {kChannel, kX, kMessage, kFinal, kMessage, kX}, FinishReason::length},
  };
  for (const Case& c : cases) {
    auto seq = computed(c.finish == FinishReason::length ? static_cast<int>(c.tokens.size()) : 16);
    seq->request.grammar = empty_object_grammar();
    seq->request.reasoning = c.span;
    Sequence fresh(seq->request);  // the constructor sets the phase from the request
    seq->matcher = fresh.matcher;
    seq->reasoning = fresh.reasoning;
    StepPlan plan;
    output_.begin_step(Clock::now());
    output_.take(*seq, tokens(c.tokens));
    output_.end_step(plan);
    std::vector<StreamEvent> got = events(*seq);
    ASSERT_FALSE(got.empty()) << c.what;
    ASSERT_TRUE(got.back().finish) << c.what;
    EXPECT_EQ(*got.back().finish, c.finish) << c.what << ": " << got.back().error;
  }
}
