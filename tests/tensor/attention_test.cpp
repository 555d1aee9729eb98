#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/attention.h"
#include "inferlab/tensor/float16.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "isa_paths.h"

using namespace inferlab;
using namespace inferlab::fast;
using namespace inferlab::test;

namespace {
struct Case {
  int heads, kv_heads, head_dim, block_size;
};
}  // namespace

// The fused online-softmax kernel (every instruction set, 1 and 2 threads) against a two-pass
// float64 softmax, for GQA and plain heads, head dims on and off the SIMD width, positions that
// end mid-block and on block edges, blocks larger than one vector of scores, sliding windows, and
// rows long enough to be split into parts.
// The blocks hold keys transposed (KVBlocks); random values make the layout's contents arbitrary,
// and the reference reads them through key_offset as the kernels must.
TEST(Attention, FusedKernelMatchesTwoPassReference) {
  IsaGuard guard;
  // Groups of 7, 1, 4, 2, 12 and 16 query heads: the SIMD kernels take them 8 (AVX-512) or 4
  // (AVX2) at a time, so 12 and 16 need two or more slices and 7 and 12 a narrower last one.
  const Case cases[] = {{14, 2, 64, 16}, {4, 4, 24, 16}, {8, 2, 32, 32}, {2, 1, 16, 8},
                        {8, 2, 128, 16}, {2, 2, 80, 64}, {12, 1, 64, 16}, {32, 2, 16, 32}};
  for (const bool f16 : {false, true})  // the cache's elements: f32, or f16 widened as they load
  for (const Case& c : cases) {
    std::mt19937 rng(c.head_dim);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int kv_dim = c.kv_heads * c.head_dim;
    // Two sequences of 70 and 33 positions in blocks of their own, as plain memory (no KVCache).
    std::vector<std::vector<float>> storage;  // a vector moved in keeps its buffer: the views stay valid
    std::vector<std::vector<uint16_t>> storage_f16;
    auto blocks_for = [&](int positions) {
      KVBlocks view;
      view.block_size = c.block_size;
      for (int b = 0; b * c.block_size < positions; ++b) {
        std::vector<float> keys(static_cast<std::size_t>(c.block_size) * kv_dim), values(keys.size());
        for (auto& k : keys) k = dist(rng) * 2;  // wide scores exercise the running max
        for (auto& v : values) v = dist(rng);
        if (f16) {  // 16 elements of padding, as KVCache has: AVX2 reads past a block's last key row
          for (auto* block : {&keys, &values}) {
            std::vector<uint16_t> half(block->size() + 16);
            for (std::size_t i = 0; i < block->size(); ++i) half[i] = f32_to_f16((*block)[i]);
            storage_f16.push_back(std::move(half));
          }
          view.keys_f16.push_back(storage_f16[storage_f16.size() - 2].data());
          view.values_f16.push_back(storage_f16.back().data());
          continue;
        }
        storage.push_back(std::move(keys));
        view.keys.push_back(storage.back().data());
        storage.push_back(std::move(values));
        view.values.push_back(storage.back().data());
      }
      return view;
    };
    const KVBlocks kva = blocks_for(70), kvb = blocks_for(33), kvc = blocks_for(1100);
    std::vector<AttentionRow> rows;
    for (int p : {0, 1, 15, 16, 17, 31, 32, 69}) rows.push_back({&kva, p});
    for (int p : {0, 7, 32}) rows.push_back({&kvb, p});
    // Rows past 512 positions, split into parts of 512 merged at the end: on a part's edge, prompt
    // rows (one task) across it, the far end, windows across parts and within the second.
    for (int p : {511, 512, 1099, 509, 510, 511, 512, 513}) rows.push_back({&kvc, p});
    rows.push_back({&kvc, 1099, 300});
    rows.push_back({&kvc, 1050, 600});
    // Sliding windows (Mistral): starting mid-block, on a block edge, at the row itself.
    rows.push_back({&kva, 69, 50});
    rows.push_back({&kva, 40, 16});
    rows.push_back({&kvb, 32, 3});
    rows.push_back({&kva, 17, 17});
    const int q_dim = c.heads * c.head_dim;
    std::vector<float> q(rows.size() * q_dim);
    ASSERT_EQ(rows.back().first, 17);  // the single-position window checked below
    for (auto& v : q) v = dist(rng);
    const AttentionShape shape{c.heads, c.kv_heads, c.head_dim, 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    std::vector<float> expected(q.size());
    causal_attention_reference(q.data(), q_dim, expected.data(), q_dim, rows, shape);
    // A window of one position: the output is that position's value vector.
    for (int h = 0; h < c.heads; ++h) {
      const int kvh = h / (c.heads / c.kv_heads);
      for (int d = 0; d < c.head_dim; ++d) {
        const std::size_t at = value_offset(c.kv_heads, c.head_dim, kvh, d, 17 % c.block_size);
        const float v = f16 ? f16_to_f32(kva.values_f16[17 / c.block_size][at]) : kva.values[17 / c.block_size][at];
        ASSERT_NEAR(expected[(rows.size() - 1) * q_dim + h * c.head_dim + d], v, 1e-6);
      }
    }
    for (Isa isa : runnable_isas()) {
      set_isa_limit(isa);
      for (int threads : {1, 2}) {
        set_threads(threads);
        std::vector<float> out(q.size(), NAN);
        causal_attention(q.data(), q_dim, out.data(), q_dim, rows, shape);
        for (std::size_t i = 0; i < out.size(); ++i)
          ASSERT_NEAR(out[i], expected[i], 2e-5) << (f16 ? "f16 " : "f32 ") << "heads " << c.heads << "/" << c.kv_heads << " dim " << c.head_dim
                                                 << " isa " << isa_name(active_isa()) << " threads " << threads << " at " << i;
      }
    }
  }
  set_threads(0);
}

// A long row's parts are fixed by its own positions: the row alone, beside other rows (a decode
// batch, a prompt) and on 1 or 2 threads gives the same bits, on every instruction set.
TEST(Attention, SplitRowsGiveTheSameBitsAloneInABatchAndOnAnyThreads) {
  IsaGuard guard;
  const int heads = 14, kv_heads = 2, hd = 64, bs = 16, kv_dim = kv_heads * hd;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> storage;
  auto blocks_for = [&](int positions) {
    KVBlocks view;
    view.block_size = bs;
    for (int b = 0; b * bs < positions; ++b) {
      for (int i = 0; i < 2; ++i) {
        std::vector<float> block(static_cast<std::size_t>(bs) * kv_dim);
        for (auto& x : block) x = dist(rng);
        storage.push_back(std::move(block));
      }
      view.keys.push_back(storage[storage.size() - 2].data());
      view.values.push_back(storage.back().data());
    }
    return view;
  };
  const KVBlocks long_seq = blocks_for(2000), other = blocks_for(600);
  const AttentionShape shape{heads, kv_heads, hd, 0.125f};
  const int q_dim = heads * hd;
  std::vector<float> q_long(q_dim);
  for (auto& x : q_long) x = dist(rng);
  // The batch: prompt rows of another sequence, the long row, a short decode row.
  std::vector<AttentionRow> batch = {{&other, 597}, {&other, 598}, {&other, 599}, {&long_seq, 1999}, {&other, 20}};
  std::vector<float> q_batch(batch.size() * q_dim);
  for (auto& x : q_batch) x = dist(rng);
  std::copy(q_long.begin(), q_long.end(), q_batch.begin() + 3 * q_dim);
  for (Isa isa : runnable_isas()) {
    set_isa_limit(isa);
    std::vector<float> alone_1(q_dim);
    set_threads(1);
    const AttentionRow row{&long_seq, 1999};
    causal_attention(q_long.data(), q_dim, alone_1.data(), q_dim, std::span(&row, 1), shape);
    for (int threads : {1, 2}) {
      set_threads(threads);
      std::vector<float> alone(q_dim), in_batch(q_batch.size());
      causal_attention(q_long.data(), q_dim, alone.data(), q_dim, std::span(&row, 1), shape);
      causal_attention(q_batch.data(), q_dim, in_batch.data(), q_dim, batch, shape);
      for (int i = 0; i < q_dim; ++i) {
        ASSERT_EQ(alone[i], alone_1[i]) << "isa " << isa_name(active_isa()) << " threads " << threads << " at " << i;
        ASSERT_EQ(in_batch[3 * q_dim + i], alone_1[i]) << "isa " << isa_name(active_isa()) << " threads " << threads << " at " << i;
      }
    }
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

// Attention sinks (gpt-oss): a logit per query head in each row's softmax denominator, carrying no
// value. The fused kernel (every instruction set, 1 and 2 threads, rows split into parts, windows)
// against the two-pass reference with the same sinks; and the reference against the definition on
// a one-position window, where the output is that position's value times 1 / (1 + e^(sink - score)).
TEST(Attention, SinksTakeTheirShareOfEachSoftmax) {
  IsaGuard guard;
  const int heads = 8, kv_heads = 2, hd = 64, bs = 16, kv_dim = kv_heads * hd, q_dim = heads * hd;
  std::mt19937 rng(43);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> storage;
  KVBlocks kv;
  kv.block_size = bs;
  for (int b = 0; b * bs < 1100; ++b) {
    for (int i = 0; i < 2; ++i) {
      std::vector<float> block(static_cast<std::size_t>(bs) * kv_dim);
      for (auto& x : block) x = dist(rng);
      storage.push_back(std::move(block));
    }
    kv.keys.push_back(storage[storage.size() - 2].data());
    kv.values.push_back(storage.back().data());
  }
  std::vector<float> sinks(heads);
  for (auto& s : sinks) s = 2.0f * dist(rng);
  sinks[0] = 30.0f;  // larger than every score: the sink takes the running max
  const std::vector<AttentionRow> rows = {{&kv, 0}, {&kv, 5}, {&kv, 40, 33}, {&kv, 511}, {&kv, 700}, {&kv, 1099, 300}, {&kv, 17, 17}};
  std::vector<float> q(rows.size() * q_dim);
  for (auto& x : q) x = dist(rng);
  AttentionShape shape{heads, kv_heads, hd, 0.125f};
  shape.sinks = sinks.data();
  std::vector<float> expected(q.size()), plain(q.size());
  causal_attention_reference(q.data(), q_dim, expected.data(), q_dim, rows, shape);
  causal_attention_reference(q.data(), q_dim, plain.data(), q_dim, rows, AttentionShape{heads, kv_heads, hd, 0.125f});
  const std::size_t last = rows.size() - 1;
  for (int h = 0; h < heads; ++h) {
    const int kvh = h / (heads / kv_heads);
    double score = 0;
    for (int d = 0; d < hd; ++d) score += static_cast<double>(q[last * q_dim + h * hd + d]) * kv.keys[1][key_offset(bs, hd, kvh, d, 1)];
    const double kept = 1.0 / (1.0 + std::exp(sinks[h] - 0.125 * score));
    for (int d = 0; d < hd; ++d)
      ASSERT_NEAR(expected[last * q_dim + h * hd + d], kept * kv.values[1][value_offset(kv_heads, hd, kvh, d, 1)], 1e-6);
  }
  double moved = 0;  // the sinks change every row
  for (std::size_t i = 0; i < q.size(); ++i) moved = std::max(moved, static_cast<double>(std::abs(expected[i] - plain[i])));
  EXPECT_GT(moved, 1e-2);
  for (Isa isa : runnable_isas()) {
    set_isa_limit(isa);
    for (int threads : {1, 2}) {
      set_threads(threads);
      std::vector<float> out(q.size(), NAN);
      causal_attention(q.data(), q_dim, out.data(), q_dim, rows, shape);
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], expected[i], 2e-5) << "isa " << isa_name(active_isa()) << " threads " << threads << " at " << i;
    }
  }
  set_threads(0);
}
