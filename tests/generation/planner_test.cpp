// The planner alone, over a tiny paged KVCache (no model): admission first come, first served
// while blocks allow; decode before prompt chunks, prompts chunked to the step's token budget;
// the newest arrival preempted when a decode step finds the pool dry.
#include <gtest/gtest.h>

#include <memory>

#include "generation/kv_prefix_manager.h"
#include "generation/planner.h"
#include "inferlab/model/config.h"

using namespace inferlab;

namespace {

constexpr int kBlockSize = 4;

class PlannerTest : public ::testing::Test {
 protected:
  void make(int blocks, PlannerOptions options = {}, bool prefix_caching = true) {
    ModelConfig config;
    config.num_layers = 1;
    config.num_kv_heads = 1;
    config.head_dim = 8;
    cache_ = std::make_unique<KVCache>(config, static_cast<std::size_t>(blocks) * kBlockSize, kBlockSize);
    kv_ = std::make_unique<KVPrefixManager>(*cache_, prefix_caching);
    planner_ = std::make_unique<Planner>(options, *kv_);
  }

  // Queues a request of `prompt` tokens (first, first + 1, ...) as the scheduler does.
  Sequence* queue(int prompt, int first = 0, int max_tokens = 16) {
    GenerationRequest request;
    for (int i = 0; i < prompt; ++i) request.prompt.push_back(first + i);
    request.max_tokens = max_tokens;
    auto seq = std::make_unique<Sequence>(std::move(request));
    seq->tokens = seq->request.prompt;
    seq->arrival = next_arrival_++;
    Sequence* raw = seq.get();
    planner_->waiting().push_back(std::move(seq));
    return raw;
  }

  // What the model runner and output stage do with a plan: each chunk's positions computed, and
  // a token appended to every sequence whose prompt is done.
  void run(const StepPlan& plan) {
    for (const PlannedChunk& chunk : plan.chunks) {
      chunk.seq->kv.length += chunk.count;
      kv_->register_full_blocks(chunk.seq->tokens, chunk.seq->kv, chunk.seq->block_hashes);
      if (chunk.seq->uncomputed() == 0) {
        chunk.seq->tokens.push_back(7);
        ++chunk.seq->generated;
      }
    }
  }

  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<KVPrefixManager> kv_;
  std::unique_ptr<Planner> planner_;
  uint64_t next_arrival_ = 0;
};

}  // namespace

TEST_F(PlannerTest, AdmitsInOrderAndTheFirstThatDoesNotFitWaits) {
  make(4);
  Sequence* a = queue(8);       // 2 blocks
  Sequence* b = queue(12, 50);  // 3 blocks: does not fit beside a
  queue(1, 90);                 // would fit, but arrived after b
  const std::vector<Admission> admitted = planner_->admit();
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].seq, a);
  EXPECT_EQ(admitted[0].cached_tokens, 0);
  EXPECT_EQ(planner_->running().size(), 1u);
  ASSERT_EQ(planner_->waiting().size(), 2u);
  EXPECT_EQ(planner_->waiting().front().get(), b);
  EXPECT_TRUE(b->kv.blocks.empty()) << "a sequence that waits holds no blocks";
}

TEST_F(PlannerTest, AdmitsNoMoreThanMaxBatch) {
  PlannerOptions options;
  options.max_batch = 2;
  make(64, options);
  for (int i = 0; i < 3; ++i) queue(2, 10 * i);
  EXPECT_EQ(planner_->admit().size(), 2u);
  EXPECT_EQ(planner_->waiting().size(), 1u);
}

TEST_F(PlannerTest, AdmissionReportsThePromptTokensTheCacheGave) {
  make(16);
  Sequence* first = queue(9);
  planner_->admit();
  run(planner_->plan());
  ASSERT_EQ(first->generated, 1);
  Sequence* second = queue(9);
  const std::vector<Admission> admitted = planner_->admit();
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].seq, second);
  EXPECT_EQ(admitted[0].cached_tokens, 2 * kBlockSize);
  EXPECT_EQ(second->uncomputed(), 1);
}

TEST_F(PlannerTest, DecodeComesFirstAndPromptsAreChunkedToTheBudget) {
  PlannerOptions options;
  options.step_token_budget = 6;
  make(64, options);
  Sequence* a = queue(3);
  planner_->admit();
  run(planner_->plan());  // a's prompt: it decodes from now on
  Sequence* b = queue(10, 20);
  Sequence* c = queue(4, 40);
  planner_->admit();

  StepPlan plan = planner_->plan();
  EXPECT_EQ(plan.decoding, 1);
  ASSERT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(plan.chunks[0].seq, a);
  EXPECT_EQ(plan.chunks[0].count, 1);
  EXPECT_EQ(plan.chunks[1].seq, b);
  EXPECT_EQ(plan.chunks[1].count, 6) << "the budget is for prompt tokens beyond decode";
  run(plan);

  plan = planner_->plan();
  ASSERT_EQ(plan.chunks.size(), 3u);
  EXPECT_EQ(plan.chunks[1].seq, b);
  EXPECT_EQ(plan.chunks[1].count, 4) << "the rest of b's prompt";
  EXPECT_EQ(plan.chunks[2].seq, c);
  EXPECT_EQ(plan.chunks[2].count, 2) << "what the budget leaves";
}

TEST_F(PlannerTest, ADryPoolPreemptsTheNewestArrivalToTheFrontOfTheQueue) {
  make(4, {}, false);
  Sequence* a = queue(4);
  Sequence* b = queue(4, 10);
  ASSERT_EQ(planner_->admit().size(), 2u);  // no watermark kept back for the first
  run(planner_->plan());                    // both prompts: 4 blocks, each at a block's end
  ASSERT_EQ(kv_->free_blocks(), 2);
  run(planner_->plan());                    // each decodes into a second block: the pool is dry
  ASSERT_EQ(kv_->free_blocks(), 0);
  for (int i = 0; i < 3; ++i) run(planner_->plan());  // the second blocks fill up
  ASSERT_EQ(a->kv.length, 8);

  const StepPlan plan = planner_->plan();
  EXPECT_EQ(plan.preemptions, 1);
  EXPECT_EQ(plan.decoding, 1);
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq, a) << "the older sequence keeps running";
  ASSERT_EQ(planner_->waiting().size(), 1u);
  EXPECT_EQ(planner_->waiting().front().get(), b);
  EXPECT_EQ(b->preemptions, 1);
  EXPECT_EQ(b->kv.length, 0) << "it recomputes from its tokens when admitted again";
  EXPECT_TRUE(b->kv.blocks.empty());
}
