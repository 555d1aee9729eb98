// The KV/prefix manager alone, over a tiny paged KVCache (no model): full blocks of a computed
// prompt are reused by a later sequence with the same prefix, only whole matching runs from the
// first block are, and cached blocks nobody holds are evicted least recently used first.
#include <gtest/gtest.h>

#include <numeric>

#include "generation/kv_prefix_manager.h"
#include "inferlab/model/config.h"

using namespace inferlab;

namespace {

constexpr int kBlockSize = 4;

ModelConfig tiny_config() {
  ModelConfig config;
  config.num_layers = 1;
  config.num_kv_heads = 1;
  config.head_dim = 8;
  return config;
}

std::vector<int32_t> tokens_from(int first, int count) {
  std::vector<int32_t> ids(count);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// A sequence whose prompt is computed: its blocks reserved, kv.length at its end, its full blocks
// registered, as the scheduler leaves it after the prompt's forward pass.
struct Computed {
  std::vector<int32_t> tokens;
  SequenceKV kv;
  std::vector<uint64_t> hashes;
};
Computed compute(KVPrefixManager& manager, std::vector<int32_t> tokens) {
  Computed seq{std::move(tokens), {}, {}};
  manager.match_prefix(seq.tokens, seq.kv, seq.hashes);
  EXPECT_TRUE(manager.reserve(seq.kv, static_cast<int>(seq.tokens.size()) - seq.kv.length));
  seq.kv.length = static_cast<int>(seq.tokens.size());
  manager.register_full_blocks(seq.tokens, seq.kv, seq.hashes);
  return seq;
}

}  // namespace

TEST(KVPrefixManager, ASharedPrefixReusesTheFullBlocksAndLeavesATokenToCompute) {
  KVCache cache(tiny_config(), 16 * kBlockSize, kBlockSize);
  KVPrefixManager manager(cache, true);
  Computed first = compute(manager, tokens_from(0, 10));  // 2 full blocks + 2 tokens
  EXPECT_EQ(first.hashes.size(), 2u);

  // The same 8 first tokens then others: both full blocks are reused, shared with the first.
  std::vector<int32_t> second = tokens_from(0, 8);
  second.push_back(99);
  SequenceKV kv;
  std::vector<uint64_t> hashes;
  manager.match_prefix(second, kv, hashes);
  EXPECT_EQ(kv.length, 8);
  ASSERT_EQ(kv.blocks.size(), 2u);
  EXPECT_EQ(kv.blocks[0], first.kv.blocks[0]);
  EXPECT_EQ(kv.blocks[1], first.kv.blocks[1]);
  EXPECT_EQ(cache.refcount(kv.blocks[0]), 3) << "the first sequence, the prefix cache and this one";

  // Exactly the 8 cached tokens: only one block, so one token is left whose logits start the answer.
  SequenceKV exact;
  std::vector<uint64_t> exact_hashes;
  manager.match_prefix(tokens_from(0, 8), exact, exact_hashes);
  EXPECT_EQ(exact.length, 4);
}

TEST(KVPrefixManager, ABlockMatchesOnlyAfterTheSameParent) {
  KVCache cache(tiny_config(), 16 * kBlockSize, kBlockSize);
  KVPrefixManager manager(cache, true);
  compute(manager, tokens_from(0, 9));
  // Tokens 4..7 are cached as the second block after 0..3; after another first block they are not.
  std::vector<int32_t> other = {50, 51, 52, 53, 4, 5, 6, 7, 60};
  SequenceKV kv;
  std::vector<uint64_t> hashes;
  manager.match_prefix(other, kv, hashes);
  EXPECT_EQ(kv.length, 0);
  EXPECT_TRUE(kv.blocks.empty());
  EXPECT_TRUE(hashes.empty());
}

TEST(KVPrefixManager, ReleasedBlocksStayCachedUntilEvictedLeastRecentlyUsedFirst) {
  KVCache cache(tiny_config(), 4 * kBlockSize, kBlockSize);  // 4 blocks
  KVPrefixManager manager(cache, true);
  Computed a = compute(manager, tokens_from(0, 5));    // block 0..3 cached, 2 blocks held
  Computed b = compute(manager, tokens_from(100, 5));  // block 100..103 cached, 2 blocks held
  EXPECT_EQ(manager.free_blocks(), 0);
  EXPECT_EQ(manager.cached_only_blocks(), 0);
  manager.release(a.kv, a.hashes);
  manager.release(b.kv, b.hashes);
  EXPECT_TRUE(a.hashes.empty());
  EXPECT_EQ(manager.free_blocks(), 2) << "each sequence's partial block is free; its full one stays cached";
  EXPECT_EQ(manager.cached_only_blocks(), 2);

  // Touch a's block: b's is now the least recently used and goes first.
  SequenceKV reuse;
  std::vector<uint64_t> reuse_hashes;
  manager.match_prefix(tokens_from(0, 5), reuse, reuse_hashes);
  manager.release(reuse, reuse_hashes);
  EXPECT_TRUE(manager.make_room(3));
  EXPECT_EQ(manager.free_blocks(), 3);
  SequenceKV kv;
  std::vector<uint64_t> hashes;
  manager.match_prefix(tokens_from(100, 5), kv, hashes);
  EXPECT_EQ(kv.length, 0) << "b's block was evicted";
  manager.match_prefix(tokens_from(0, 5), kv, hashes);
  EXPECT_EQ(kv.length, kBlockSize) << "a's block was kept";
  // A block a sequence holds is never evicted: 3 free is all there can be now.
  EXPECT_FALSE(manager.make_room(4));
}

TEST(KVPrefixManager, WithoutPrefixCachingNothingIsKept) {
  KVCache cache(tiny_config(), 4 * kBlockSize, kBlockSize);
  KVPrefixManager manager(cache, false);
  Computed a = compute(manager, tokens_from(0, 9));
  EXPECT_TRUE(a.hashes.empty());
  manager.release(a.kv, a.hashes);
  EXPECT_EQ(manager.free_blocks(), 4);
  SequenceKV kv;
  std::vector<uint64_t> hashes;
  manager.match_prefix(tokens_from(0, 9), kv, hashes);
  EXPECT_EQ(kv.length, 0);
}
