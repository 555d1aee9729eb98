#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/attention.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/model/model.h"

using namespace inferlab;
using namespace inferlab::fast;

namespace {
struct Case {
  int heads, kv_heads, head_dim, block_size;
};
}  // namespace

// The fused online-softmax kernel (every instruction set, 1 and 2 threads) against a two-pass
// float64 softmax, for GQA and plain heads, head dims on and off the SIMD width, positions that
// end mid-block and on block edges, and blocks larger than one vector of scores.
TEST(Attention, FusedKernelMatchesTwoPassReference) {
  const Case cases[] = {{14, 2, 64, 16}, {4, 4, 24, 16}, {8, 2, 32, 32}, {2, 1, 16, 8}, {8, 2, 128, 16}, {2, 2, 80, 64}};
  for (const Case& c : cases) {
    ModelConfig config;
    config.num_layers = 2;
    config.num_heads = c.heads;
    config.num_kv_heads = c.kv_heads;
    config.head_dim = c.head_dim;
    config.hidden_size = c.heads * c.head_dim;
    KVCache cache(config, 160, c.block_size);
    std::mt19937 rng(c.head_dim);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int kv_dim = c.kv_heads * c.head_dim;
    SequenceKV a, b;
    ASSERT_TRUE(a.reserve(cache, 70));
    ASSERT_TRUE(b.reserve(cache, 33));
    for (const SequenceKV* seq : {&a, &b})
      for (int layer = 0; layer < 2; ++layer)
        for (int block : seq->blocks)
          for (int i = 0; i < c.block_size * kv_dim; ++i) {
            cache.keys(layer, block)[i] = dist(rng) * 2;  // wide scores exercise the running max
            cache.values(layer, block)[i] = dist(rng);
          }
    const int layer = 1;
    const KVBlocks kva = kv_blocks(cache, layer, a), kvb = kv_blocks(cache, layer, b);
    std::vector<AttentionRow> rows;
    for (int p : {0, 1, 15, 16, 17, 31, 32, 69}) rows.push_back({&kva, p});
    for (int p : {0, 7, 32}) rows.push_back({&kvb, p});
    const int q_dim = c.heads * c.head_dim;
    std::vector<float> q(rows.size() * q_dim);
    for (auto& v : q) v = dist(rng);
    const AttentionShape shape{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    std::vector<float> expected(q.size());
    causal_attention_reference(q.data(), q_dim, expected.data(), q_dim, rows, shape);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      set_isa_limit(isa);
      for (int threads : {1, 2}) {
        set_threads(threads);
        std::vector<float> out(q.size(), NAN);
        causal_attention(q.data(), q_dim, out.data(), q_dim, rows, shape);
        for (std::size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], expected[i], 2e-5) << "heads " << c.heads << "/" << c.kv_heads << " dim " << c.head_dim
                                                 << " isa " << isa_name(active_isa()) << " threads " << threads << " at " << i;
      }
    }
    set_isa_limit(Isa::Avx512);
    a.release(cache);
    b.release(cache);
  }
  set_threads(0);
}

TEST(Attention, BadShapesAndMissingBlocksGetClearErrors) {
  KVBlocks empty;
  empty.block_size = 16;
  const AttentionRow row{&empty, 3};
  std::vector<float> q(64), out(64);
  EXPECT_THROW(causal_attention(q.data(), 64, out.data(), 64, std::span(&row, 1), AttentionShape{1, 1, 64, 1}), Error);
  EXPECT_THROW(causal_attention(q.data(), 64, out.data(), 64, std::span(&row, 1), AttentionShape{3, 2, 64, 1}), Error);
}
