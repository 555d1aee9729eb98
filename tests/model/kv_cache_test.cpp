// The paged KV cache: block bookkeeping (reference counts for shared prefixes), the one
// bytes-per-token formula, and K/V rows written per position coming back through the attention
// kernels' block view and the contiguous gather.
#include <gtest/gtest.h>

#include "inferlab/tensor/float16.h"

#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/model/config.h"
#include "inferlab/model/kv_cache.h"
#include "backend/cpu/cpu_kv_storage.h"

using namespace inferlab;

TEST(KVCache, AllocatesReleasesAndCountsReferences) {
  ModelConfig config;
  config.num_layers = 2, config.num_kv_heads = 2, config.head_dim = 8;
  KVCache cache(config, 40, 16);  // rounds up to 3 blocks
  EXPECT_EQ(cache.num_blocks(), 3);
  EXPECT_EQ(cache.bytes_per_token(), 2u * 2 * 2 * 8 * 4);
  EXPECT_EQ(cache.bytes(), 3u * 16 * cache.bytes_per_token());
  SequenceKV a, b;
  ASSERT_TRUE(a.reserve(cache, 20));  // 2 blocks
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_EQ(cache.free_blocks(), 1);
  EXPECT_FALSE(b.reserve(cache, 33));  // needs 3, only 1 free: nothing kept
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(cache.free_blocks(), 1);
  // Share a's first block with b (prefix caching), then release a: the block survives for b.
  cache.retain(a.blocks[0]);
  b.blocks.push_back(a.blocks[0]);
  b.length = 16;
  EXPECT_EQ(cache.refcount(a.blocks[0]), 2);
  a.release(cache);
  EXPECT_EQ(a.length, 0);
  EXPECT_EQ(cache.free_blocks(), 2);
  EXPECT_EQ(cache.refcount(b.blocks[0]), 1);
  b.release(cache);
  EXPECT_EQ(cache.free_blocks(), 3);
  EXPECT_THROW(cache.release(0), Error);  // double free is an error, not corruption
  EXPECT_FALSE(cache.allocate() == std::nullopt);
}

TEST(KVCache, BytesPerTokenIsOneFormula) {
  ModelConfig config;
  config.num_layers = 24, config.num_kv_heads = 2, config.head_dim = 64;  // Qwen2.5-0.5B
  EXPECT_EQ(kv_bytes_per_token(24, 2, 64, 2), 12288u);
  EXPECT_EQ(kv_bytes_per_token(config), 24576u);
  EXPECT_EQ(kv_bytes_per_token(config, 1), 6144u);
  EXPECT_EQ(KVCache(config, 16).bytes_per_token(), kv_bytes_per_token(config));
}

// f32, and f16 (whose values here are all exact halves: multiples of 1/4 below 512).
class KVCacheTypes : public ::testing::TestWithParam<KVType> {};
INSTANTIATE_TEST_SUITE_P(KVCache, KVCacheTypes, ::testing::Values(KVType::F32, KVType::F16),
                         [](const auto& info) { return std::string(kv_type_name(info.param)); });

TEST_P(KVCacheTypes, WrittenRowsReadBackThroughBlocksAndGather) {
  ModelConfig config;
  config.num_layers = 3, config.num_kv_heads = 2, config.head_dim = 4;
  const int kv_dim = 8, block_size = 4, positions = 11;  // ends mid-block
  const bool f16 = GetParam() == KVType::F16;
  KVCache cache(config, 64, block_size, GetParam());
  EXPECT_EQ(cache.bytes_per_token(), kv_bytes_per_token(config, f16 ? 2 : 4));
  SequenceKV other, seq;
  ASSERT_TRUE(other.reserve(cache, 5));  // seq's blocks are not the first ones
  ASSERT_TRUE(seq.reserve(cache, positions));
  auto key_of = [&](int layer, int p, int i) { return 100.0f * layer + 10.0f * p + i + 0.25f; };
  auto value_of = [&](int layer, int p, int i) { return -key_of(layer, p, i); };
  for (int layer = 0; layer < 3; ++layer)
    for (int p = 0; p < positions; ++p) {
      std::vector<float> k(kv_dim), v(kv_dim);
      for (int i = 0; i < kv_dim; ++i) k[i] = key_of(layer, p, i), v[i] = value_of(layer, p, i);
      cache.write(layer, seq, p, k.data(), v.data());
    }
  fast::KVBlocks view;
  auto& storage = dynamic_cast<cpu::CpuKVStorage&>(cache.storage());  // the CPU backend's layout
  for (int layer = 0; layer < 3; ++layer) {
    storage.layer_blocks(layer, seq.blocks, view);  // refilled in place, layer after layer
    ASSERT_EQ(view.block_size, block_size);
    ASSERT_EQ(view.blocks(), seq.blocks.size());
    // One pair of block lists is filled, the one of the cache's element type.
    ASSERT_EQ(f16 ? view.values_f16.size() : view.values.size(), seq.blocks.size());
    ASSERT_EQ(f16 ? view.keys.size() + view.values.size() : view.keys_f16.size() + view.values_f16.size(), 0u);
    std::vector<float> keys(positions * kv_dim), values(keys.size());
    cache.gather(layer, seq, positions, keys.data(), values.data());
    for (int p = 0; p < positions; ++p)
      for (int i = 0; i < kv_dim; ++i) {
        // Keys transposed within a block, values as rows (fast::KVBlocks).
        const std::size_t k_at = fast::key_offset(block_size, 4, i / 4, i % 4, p % block_size);
        const std::size_t v_at = fast::value_offset(2, 4, i / 4, i % 4, p % block_size);
        ASSERT_EQ(view.f16(), f16);
        const float k = f16 ? f16_to_f32(view.keys_f16[p / block_size][k_at]) : view.keys[p / block_size][k_at];
        const float v = f16 ? f16_to_f32(view.values_f16[p / block_size][v_at]) : view.values[p / block_size][v_at];
        EXPECT_EQ(k, key_of(layer, p, i)) << "layer " << layer << " position " << p;
        EXPECT_EQ(v, value_of(layer, p, i)) << "layer " << layer << " position " << p;
        EXPECT_EQ(keys[p * kv_dim + i], key_of(layer, p, i)) << "gathered, layer " << layer << " position " << p;
        EXPECT_EQ(values[p * kv_dim + i], value_of(layer, p, i)) << "gathered, layer " << layer << " position " << p;
      }
  }
  // The other sequence's blocks were never written.
  storage.layer_blocks(0, other.blocks, view);
  for (std::size_t b = 0; b < view.blocks(); ++b)
    for (int i = 0; i < block_size * kv_dim; ++i) EXPECT_EQ(f16 ? view.keys_f16[b][i] : view.keys[b][i], 0.0f);
}
