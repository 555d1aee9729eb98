#include "inferlab/tensor/fast/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/tensor/float16.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/simd_math.h"
#include "tensor/fast/isa_target.h"

namespace inferlab::fast {

namespace {

// A row's cached positions are split into parts of kPartPositions (whole blocks), each part a task
// of its own, the parts' softmax states merged at the end (as in flash-decoding). A decode row
// otherwise makes only kv_heads tasks (2 for Qwen2.5-0.5B), one core each, however many cores
// there are. Parts depend only on the row's own positions, never on the batch or the thread
// count, so neither changes a row's result.
constexpr int kPartPositions = 512;
int part_positions(int block_size) { return std::max(1, kPartPositions / block_size) * block_size; }

// A row's parts: the first one's index (position / part length) and how many it spans. A row of
// one part writes its output directly; a row of several writes each part's state to `partials`
// from slot `slot` on (one slot per part), and merge_parts combines them.
struct RowParts {
  int first = 0, count = 1;
  std::size_t slot = 0;
};

struct Task {
  const float* q;
  std::size_t q_stride;
  float* out;
  std::size_t out_stride;
  std::span<const AttentionRow> rows;
  AttentionShape shape;
  std::span<const RowParts> parts;  // per row
  float* partials = nullptr;        // per slot and query head: the head_dim sums, the max, the sum
};

// Query head g of kv head `kv_head`, of row `row`, over the positions of part `part`: the weighted
// sum of values scaled by exp(-max), the max score and the sum of exp(score - max).
void finish_part(const Task& t, int row, int kv_head, int part, int g, const float* acc, float max, float sum) {
  const int hd = t.shape.head_dim, head = kv_head * (t.shape.heads / t.shape.kv_heads) + g;
  const RowParts& rp = t.parts[row];
  if (rp.count == 1) {
    float* o = t.out + row * t.out_stride + head * hd;
    float inv = 1.0f / sum;
    if (t.shape.sinks) {  // the sink joins the sum once the max is known: acc and sum rescaled to it
      const float sink = t.shape.sinks[head], top = std::max(max, sink), keep = std::exp(max - top);
      inv = keep / (sum * keep + std::exp(sink - top));
    }
    for (int d = 0; d < hd; ++d) o[d] = acc[d] * inv;
    return;
  }
  float* slot = t.partials + ((rp.slot + (part - rp.first)) * t.shape.heads + head) * (hd + 2);
  std::copy_n(acc, hd, slot);
  slot[hd] = max, slot[hd + 1] = sum;
}

// The parts of a row of several, in order: each rescaled to the largest max.
void merge_parts(const Task& t, int row) {
  const int hd = t.shape.head_dim;
  const RowParts& rp = t.parts[row];
  for (int head = 0; head < t.shape.heads; ++head) {
    auto slot = [&](int i) { return t.partials + ((rp.slot + i) * t.shape.heads + head) * (hd + 2); };
    float max = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < rp.count; ++i) max = std::max(max, slot(i)[hd]);
    if (t.shape.sinks) max = std::max(max, t.shape.sinks[head]);
    float* o = t.out + row * t.out_stride + head * hd;
    std::fill_n(o, hd, 0.0f);
    float sum = t.shape.sinks ? std::exp(t.shape.sinks[head] - max) : 0.0f;
    for (int i = 0; i < rp.count; ++i) {
      const float* part = slot(i);
      const float w = std::exp(part[hd] - max);
      sum += part[hd + 1] * w;
      for (int d = 0; d < hd; ++d) o[d] += part[d] * w;
    }
    const float inv = 1.0f / sum;
    for (int d = 0; d < hd; ++d) o[d] *= inv;
  }
}

// The next chunk's keys (rows block_size apart) and values (rows value_stride apart), prefetched
// line by line as the kernels read the current chunk's (null: none). The cache's blocks are apart
// in memory, where the hardware prefetchers stop: decode at 1,024-4,096 cached positions read K/V
// at ~10 GB/s on a Zen 5 without it, ~18-21 GB/s with it (1 block ahead; 2 or 3 were no better).
template <typename E>
struct Ahead {
  const E* keys = nullptr;
  const E* values = nullptr;
  int value_stride = 0;
};
inline void prefetch_line(const void* p) { __builtin_prefetch(p, 0, 3); }

// A block's keys and values in the cache's element type E: float, or uint16_t for f16.
template <typename E>
const E* key_block(const KVBlocks& kv, int b);
template <>
inline const float* key_block<float>(const KVBlocks& kv, int b) { return kv.keys[b]; }
template <>
inline const uint16_t* key_block<uint16_t>(const KVBlocks& kv, int b) { return kv.keys_f16[b]; }
template <typename E>
const E* value_block(const KVBlocks& kv, int b);
template <>
inline const float* value_block<float>(const KVBlocks& kv, int b) { return kv.values[b]; }
template <>
inline const uint16_t* value_block<uint16_t>(const KVBlocks& kv, int b) { return kv.values_f16[b]; }

// The first chunk of the block after the one holding position j0, for kv head h (or the block of
// j0 again at the last block before position `end`: a prefetch of lines already there).
template <typename E>
Ahead<E> next_block_ahead(const KVBlocks& kv, int j0, int end, int h, int kv_heads, int hd) {
  const int bs = kv.block_size, b = std::min(j0 / bs + 1, end / bs);
  return {key_block<E>(kv, b) + key_offset(bs, hd, h, 0, 0), value_block<E>(kv, b) + value_offset(kv_heads, hd, h, 0, 0),
          kv_heads * hd};
}

constexpr int kMaxHeadDim = 256;
constexpr int kMaxGroup = 16;

// The state of a (row, kv head) task across chunks of positions, per query head of its group:
// the weighted sum of values so far, scaled by exp(-running max), and the running max and sum.
struct OnlineSoftmax {
  alignas(64) float acc[kMaxGroup][kMaxHeadDim];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  alignas(64) float weight[kMaxGroup][16];  // the chunk's exp(score - max) per position, 0 past n
  float correction[kMaxGroup];              // the chunk's exp(old max - new max)

  void reset(int group, int hd) {
    for (int g = 0; g < group; ++g) {
      running_max[g] = -std::numeric_limits<float>::infinity();
      running_sum[g] = 0;
      std::fill_n(acc[g], hd, 0.0f);
    }
  }
  // Folds one chunk's scores of head g into its running max and sum; keeps the weights and the
  // correction for the values.
  void update(int g, float chunk_sum_of_exp, float new_max) {
    correction[g] = std::exp(running_max[g] - new_max);
    running_sum[g] = running_sum[g] * correction[g] + chunk_sum_of_exp;
    running_max[g] = new_max;
  }
};

// One chunk of `n` positions for up to 8 (AVX-512) or 4 (AVX2) query heads g0.. of a kv head.
template <typename E>
using ChunkFn = void (*)(OnlineSoftmax&, int g0, const float* q, int hd, float scale, const E* keys, int bs,
                         const E* const* value, int n, Ahead<E> ahead);

// Consecutive prompt rows of one sequence attend as one task (up to kRowsPerTask; any other row
// alone): each chunk of K/V is read from memory or L3 once for all of them, then from L1, instead
// of once per row. A prompt's attention is mostly arithmetic, so this gained little (pp512 after
// 2,048 cached positions, 2 threads, Zen 5: 683-692 -> 694-715 t/s). Each row's arithmetic is the
// same as alone (the same chunks, in the same order): its result does not depend on the rows
// beside it.
constexpr int kRowsPerTask = 4;

// Rows row0 .. row0 + rows - 1 (one row, or consecutive positions with no window), kv head h,
// the positions of part `part`, in chunks of `lanes` positions (a block's, or fewer at its ends),
// the group's query heads `max_heads` at a time through `chunk`.
template <typename E>
void attend_rows(const Task& t, int row0, int rows, int kv_head, int part, int lanes, int max_heads, const ChunkFn<E>* chunk) {
  const AttentionShape& s = t.shape;
  const int hd = s.head_dim, group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd;
  const AttentionRow& first = t.rows[row0];
  const AttentionRow& last = t.rows[row0 + rows - 1];  // the furthest position
  const int bs = first.kv->block_size, part_len = part_positions(bs);
  const int begin = std::max(first.first, part * part_len), end = std::min(last.position, (part + 1) * part_len - 1);
  OnlineSoftmax st[kRowsPerTask];
  for (int k = 0; k < rows; ++k) st[k].reset(group, hd);
  for (int j0 = begin; j0 <= end; j0 = (j0 / bs + 1) * bs) {
    const int skip = j0 % bs;  // positions before the window's first, in its first block
    const E* keys_base = key_block<E>(*first.kv, j0 / bs) + key_offset(bs, hd, kv_head, 0, skip);
    const E* values_base = value_block<E>(*first.kv, j0 / bs) + value_offset(s.kv_heads, hd, kv_head, 0, skip);
    const int block_n = std::min(bs - skip, end + 1 - j0);
    // Past the part's end too: with one thread, the next task of this kv head is the next part.
    const Ahead<E> next_block = next_block_ahead<E>(*first.kv, j0, last.position, kv_head, s.kv_heads, hd);
    for (int c0 = 0; c0 < block_n; c0 += lanes) {
      const Ahead<E> ahead = c0 + lanes >= block_n
                                 ? next_block
                                 : Ahead<E>{keys_base + c0 + lanes, values_base + static_cast<std::size_t>(c0 + lanes) * kv_dim, kv_dim};
      for (int k = 0; k < rows; ++k) {
        const int n = std::min({lanes, block_n - c0, t.rows[row0 + k].position + 1 - (j0 + c0)});
        if (n <= 0) continue;  // past this row's own position
        // Positions past n read position n-1 (inside the block) and are masked out of the scores.
        const E* value[16];
        for (int i = 0; i < lanes; ++i) value[i] = values_base + static_cast<std::size_t>(c0 + std::min(i, n - 1)) * kv_dim;
        const float* q = t.q + (row0 + k) * t.q_stride + kv_head * group * hd;
        for (int g = 0; g < group; g += max_heads) {
          const int heads = std::min(max_heads, group - g);
          chunk[heads - 1](st[k], g, q + g * hd, hd, s.scale, keys_base + c0, bs, value, n,
                           k == 0 && g == 0 ? ahead : Ahead<E>{});
        }
      }
    }
  }
  for (int k = 0; k < rows; ++k)
    if (t.rows[row0 + k].position >= begin)  // the row reaches this part
      for (int g = 0; g < group; ++g) finish_part(t, row0 + k, kv_head, part, g, st[k].acc[g], st[k].running_max[g], st[k].running_sum[g]);
}

// One (row, kv head, part): its group of query heads, online softmax over blocks of positions.
template <typename E>
void attend_row_scalar(const Task& t, int row, int kv_head, int part) {
  const AttentionShape& s = t.shape;
  const int hd = s.head_dim, group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd, bs = t.rows[row].kv->block_size;
  const AttentionRow& r = t.rows[row];
  const int part_len = part_positions(bs);
  const int begin = std::max(r.first, part * part_len), end = std::min(r.position, (part + 1) * part_len - 1);
  if (begin > end) return;  // a row of a group that does not reach this part
  std::vector<float> acc(static_cast<std::size_t>(group) * hd, 0.0f), scores(bs);
  std::vector<float> running_max(group, -std::numeric_limits<float>::infinity()), running_sum(group, 0.0f);
  // From the part's first position (mid-block, maybe, in a window) to its last, block by block.
  for (int j0 = begin; j0 <= end; j0 = (j0 / bs + 1) * bs) {
    const int skip = j0 % bs, n = std::min(bs - skip, end + 1 - j0);
    const E* keys = key_block<E>(*r.kv, j0 / bs) + key_offset(bs, hd, kv_head, 0, skip);  // row d at d * bs
    const E* values = value_block<E>(*r.kv, j0 / bs) + value_offset(s.kv_heads, hd, kv_head, 0, skip);
    for (int g = 0; g < group; ++g) {
      const int h = kv_head * group + g;
      const float* q = t.q + row * t.q_stride + h * hd;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int i = 0; i < n; ++i) {
        float dot = 0;
        for (int d = 0; d < hd; ++d) dot += q[d] * kv_to_f32(keys[d * bs + i]);
        scores[i] = dot * s.scale;
        block_max = std::max(block_max, scores[i]);
      }
      const float new_max = std::max(running_max[g], block_max);
      const float correction = std::exp(running_max[g] - new_max);
      float* a = &acc[static_cast<std::size_t>(g) * hd];
      for (int d = 0; d < hd; ++d) a[d] *= correction;
      float sum = 0;
      for (int i = 0; i < n; ++i) {
        const float e = std::exp(scores[i] - new_max);
        sum += e;
        for (int d = 0; d < hd; ++d) a[d] += e * kv_to_f32(values[i * kv_dim + d]);
      }
      running_sum[g] = running_sum[g] * correction + sum;
      running_max[g] = new_max;
    }
  }
  for (int g = 0; g < group; ++g)
    finish_part(t, row, kv_head, part, g, &acc[static_cast<std::size_t>(g) * hd], running_max[g], running_sum[g]);
}
template <typename E>
void attend_scalar(const Task& t, int row0, int rows, int kv_head, int part) {
  for (int k = 0; k < rows; ++k) attend_row_scalar<E>(t, row0 + k, kv_head, part);
}

}  // namespace

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

// 16 elements widened to f32: all of them, or those in `valid` (the rest 0, never read).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(const float* p, __mmask16 valid) { return _mm512_maskz_loadu_ps(valid, p); }
inline __m512 load16(const uint16_t* p, __mmask16 valid) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(valid, p)); }

// One chunk of up to 16 positions for S query heads g0.. of a kv head, AVX-512. Scores: keys are
// stored transposed (KVBlocks), so row d of the chunk holds dimension d of its 16 positions and
// a head's 16 scores are hd FMAs, two chains per head (even and odd d), each key row loaded once
// for the S heads. Values: acc = acc * correction + sum of weight[i] * value[i], each value
// vector loaded once for the S heads, two chains per head (even and odd positions). The kernel
// before took one head at a time with keys as rows (16 dot products, a transpose-and-add tree,
// the softmax, then the values, each head's K/V reloaded from L1): Qwen2.5-0.5B's 24 layers at
// 1,024 cached positions took 2.3 ms per token against 1.1 ms now, at 1 thread on a Zen 5
// (docs/speed.md, "Decode at a depth").
template <typename E, int S>
void attend_chunk_avx512(OnlineSoftmax& st, int g0, const float* q, int hd, float scale, const E* keys, int bs,
                         const E* const* value, int n, Ahead<E> ahead) {
  const __mmask16 valid = n == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
  __m512 even[S], odd[S];
  #pragma GCC unroll 8
  for (int h = 0; h < S; ++h) even[h] = odd[h] = _mm512_setzero_ps();
  for (int d = 0; d < hd; d += 2) {  // masked loads: a partial chunk never reads past its block's row
    if (ahead.keys) prefetch_line(ahead.keys + d * bs), prefetch_line(ahead.keys + (d + 1) * bs);
    const __m512 k0 = load16(keys + d * bs, valid), k1 = load16(keys + (d + 1) * bs, valid);
    #pragma GCC unroll 8
    for (int h = 0; h < S; ++h) {
      even[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + d]), k0, even[h]);
      odd[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + d + 1]), k1, odd[h]);
    }
  }
  #pragma GCC unroll 8
  for (int h = 0; h < S; ++h) {
    const int g = g0 + h;
    const __m512 sv = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-std::numeric_limits<float>::infinity()),
                                           _mm512_mul_ps(_mm512_add_ps(even[h], odd[h]), _mm512_set1_ps(scale)));
    const float block_max = _mm512_reduce_max_ps(sv);
    const float new_max = std::max(st.running_max[g], block_max);
    const __m512 e = _mm512_maskz_mov_ps(valid, detail::exp512(_mm512_sub_ps(sv, _mm512_set1_ps(new_max))));
    _mm512_store_ps(st.weight[g], e);
    st.update(g, _mm512_reduce_add_ps(e), new_max);
  }
  for (int v = 0; v < hd; v += 16) {
    #pragma GCC unroll 8
    for (int h = 0; h < S; ++h)
      even[h] = _mm512_mul_ps(_mm512_load_ps(st.acc[g0 + h] + v), _mm512_set1_ps(st.correction[g0 + h])), odd[h] = _mm512_setzero_ps();
    if (ahead.values && v * sizeof(E) % 64 == 0)  // once per line
      for (int i = 0; i < 16; ++i) prefetch_line(ahead.values + i * ahead.value_stride + v);
    for (int i = 0; i < n; i += 2) {  // i + 1 == n reads position n - 1 with a zero weight
      const __m512 v0 = load16(value[i] + v), v1 = load16(value[i + 1] + v);
      #pragma GCC unroll 8
      for (int h = 0; h < S; ++h) {
        even[h] = _mm512_fmadd_ps(_mm512_set1_ps(st.weight[g0 + h][i]), v0, even[h]);
        odd[h] = _mm512_fmadd_ps(_mm512_set1_ps(st.weight[g0 + h][i + 1]), v1, odd[h]);
      }
    }
    #pragma GCC unroll 8
    for (int h = 0; h < S; ++h) _mm512_store_ps(st.acc[g0 + h] + v, _mm512_add_ps(even[h], odd[h]));
  }
}

template <typename E>
constexpr ChunkFn<E> kChunkAvx512[8] = {attend_chunk_avx512<E, 1>, attend_chunk_avx512<E, 2>, attend_chunk_avx512<E, 3>,
                                        attend_chunk_avx512<E, 4>, attend_chunk_avx512<E, 5>, attend_chunk_avx512<E, 6>,
                                        attend_chunk_avx512<E, 7>, attend_chunk_avx512<E, 8>};

}  // namespace
#pragma GCC diagnostic pop
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma,f16c")
namespace {

// 8 elements widened to f32. The masked forms leave lanes past n to the caller's mask: AVX2 has
// no masked 16-bit load, so an f16 row reads up to 7 elements past the chunk (KVCache pads its
// pools for the last row).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const float* p, __m256i valid) { return _mm256_maskload_ps(p, valid); }
inline __m256 load8(const uint16_t* p, __m256i) { return load8(p); }

// attend_chunk_avx512 on 8 lanes: chunks of 8 positions, up to 4 query heads at once (their
// accumulators fill 8 of the 16 ymm registers).
template <typename E, int S>
void attend_chunk_avx2(OnlineSoftmax& st, int g0, const float* q, int hd, float scale, const E* keys, int bs,
                       const E* const* value, int n, Ahead<E> ahead) {
  const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 even[S], odd[S];
  #pragma GCC unroll 4
  for (int h = 0; h < S; ++h) even[h] = odd[h] = _mm256_setzero_ps();
  for (int d = 0; d < hd; d += 2) {
    if (ahead.keys) prefetch_line(ahead.keys + d * bs), prefetch_line(ahead.keys + (d + 1) * bs);
    const __m256 k0 = load8(keys + d * bs, valid), k1 = load8(keys + (d + 1) * bs, valid);
    #pragma GCC unroll 4
    for (int h = 0; h < S; ++h) {
      even[h] = _mm256_fmadd_ps(_mm256_set1_ps(q[h * hd + d]), k0, even[h]);
      odd[h] = _mm256_fmadd_ps(_mm256_set1_ps(q[h * hd + d + 1]), k1, odd[h]);
    }
  }
  #pragma GCC unroll 4
  for (int h = 0; h < S; ++h) {
    const int g = g0 + h;
    const __m256 sv = _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()),
                                       _mm256_mul_ps(_mm256_add_ps(even[h], odd[h]), _mm256_set1_ps(scale)),
                                       _mm256_castsi256_ps(valid));
    const float new_max = std::max(st.running_max[g], detail::hmax256(sv));
    const __m256 e = _mm256_and_ps(detail::exp256(_mm256_sub_ps(sv, _mm256_set1_ps(new_max))), _mm256_castsi256_ps(valid));
    _mm256_store_ps(st.weight[g], e);
    st.update(g, detail::hsum256(e), new_max);
  }
  for (int v = 0; v < hd; v += 8) {
    #pragma GCC unroll 4
    for (int h = 0; h < S; ++h)
      even[h] = _mm256_mul_ps(_mm256_load_ps(st.acc[g0 + h] + v), _mm256_set1_ps(st.correction[g0 + h])), odd[h] = _mm256_setzero_ps();
    if (ahead.values && v * sizeof(E) % 64 == 0)  // once per line
      for (int i = 0; i < 8; ++i) prefetch_line(ahead.values + i * ahead.value_stride + v);
    for (int i = 0; i < n; i += 2) {  // i + 1 == n reads position n - 1 with a zero weight
      const __m256 v0 = load8(value[i] + v), v1 = load8(value[i + 1] + v);
      #pragma GCC unroll 4
      for (int h = 0; h < S; ++h) {
        even[h] = _mm256_fmadd_ps(_mm256_set1_ps(st.weight[g0 + h][i]), v0, even[h]);
        odd[h] = _mm256_fmadd_ps(_mm256_set1_ps(st.weight[g0 + h][i + 1]), v1, odd[h]);
      }
    }
    #pragma GCC unroll 4
    for (int h = 0; h < S; ++h) _mm256_store_ps(st.acc[g0 + h] + v, _mm256_add_ps(even[h], odd[h]));
  }
}

template <typename E>
constexpr ChunkFn<E> kChunkAvx2[4] = {
    attend_chunk_avx2<E, 1>, attend_chunk_avx2<E, 2>, attend_chunk_avx2<E, 3>, attend_chunk_avx2<E, 4>};

}  // namespace
INFERLAB_TARGET_END

namespace {
template <typename E>
void attend_avx512(const Task& t, int row0, int rows, int kv_head, int part) {
  attend_rows<E>(t, row0, rows, kv_head, part, 16, 8, kChunkAvx512<E>);
}
template <typename E>
void attend_avx2(const Task& t, int row0, int rows, int kv_head, int part) {
  attend_rows<E>(t, row0, rows, kv_head, part, 8, 4, kChunkAvx2<E>);
}

void check(std::span<const AttentionRow> rows, const AttentionShape& s) {
  if (s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 || s.heads % s.kv_heads != 0)
    fail("attention: {} heads over {} kv heads of dim {} is not a valid shape", s.heads, s.kv_heads, s.head_dim);
  for (const auto& r : rows) {
    if (!r.kv || r.kv->block_size <= 0) fail("attention: a row without KV blocks");
    if (r.position < 0 || static_cast<std::size_t>(r.position / r.kv->block_size) >= r.kv->blocks())
      fail("attention: position {} has no KV block in its sequence ({} blocks)", r.position, r.kv->blocks());
    if (r.kv->f16() != rows.front().kv->f16()) fail("attention: rows over f32 and f16 caches in one call");
    if (r.first < 0 || r.first > r.position)
      fail("attention: window start {} is outside positions 0..{}", r.first, r.position);
  }
}
}  // namespace

void causal_attention(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                      std::span<const AttentionRow> rows, const AttentionShape& shape) {
  check(rows, shape);
  // Each row's parts, and slots for the partial states of rows of several.
  std::vector<RowParts> parts(rows.size());
  std::size_t slots = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const int part_len = part_positions(rows[r].kv->block_size);
    parts[r].first = rows[r].first / part_len;
    parts[r].count = rows[r].position / part_len - parts[r].first + 1;
    if (parts[r].count > 1) parts[r].slot = slots, slots += static_cast<std::size_t>(parts[r].count);
  }
  // Per calling thread (the server may run several engines), as matmul's prepared input.
  thread_local std::vector<float> partials;
  partials.resize(slots * shape.heads * (shape.head_dim + 2));
  const Task task{q, q_stride, out, out_stride, rows, shape, parts, partials.data()};
  const int group = shape.heads / shape.kv_heads;
  const bool f16 = !rows.empty() && rows.front().kv->f16();
  using AttendFn = void (*)(const Task&, int row0, int rows, int kv_head, int part);
  AttendFn attend = f16 ? attend_scalar<uint16_t> : attend_scalar<float>;
  if (active_isa() >= Isa::Avx512 && shape.head_dim % 16 == 0 && shape.head_dim <= kMaxHeadDim && group <= kMaxGroup)
    attend = f16 ? attend_avx512<uint16_t> : attend_avx512<float>;
  else if (active_isa() >= Isa::Avx2 && shape.head_dim % 8 == 0 && shape.head_dim <= kMaxHeadDim && group <= kMaxGroup)
    attend = f16 ? attend_avx2<uint16_t> : attend_avx2<float>;
  // Tasks: (row group, part, kv head), a row group being up to kRowsPerTask consecutive positions
  // of one sequence without a window (a prompt's rows), else one row; its parts are those of its
  // last row (the earlier rows reach fewer).
  struct GroupPart {
    int row0, rows, part;
  };
  std::vector<GroupPart> units;
  for (std::size_t r = 0; r < rows.size();) {
    std::size_t n = 1;
    while (n < kRowsPerTask && r + n < rows.size() && rows[r + n].kv == rows[r].kv && rows[r].first == 0 &&
           rows[r + n].first == 0 && rows[r + n].position == rows[r + n - 1].position + 1)
      ++n;
    const RowParts& last = parts[r + n - 1];
    for (int p = parts[r].first; p < last.first + last.count; ++p)
      units.push_back({static_cast<int>(r), static_cast<int>(n), p});
    r += n;
  }
  const int tasks = static_cast<int>(units.size()) * shape.kv_heads;
  auto run = [&](int64_t i) {
    const GroupPart& u = units[static_cast<std::size_t>(i / shape.kv_heads)];
    attend(task, u.row0, u.rows, static_cast<int>(i % shape.kv_heads), u.part);
  };
  ThreadPool& pool = kernel_pool();
  if (pool.size() == 1 || tasks == 1)
    for (int i = 0; i < tasks; ++i) run(i);
  else  // claimed one task at a time: later rows of a causal prompt see more positions, and a
        // thread the OS delays leaves its share to the others
    pool.run_chunks(tasks, run);
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (parts[r].count > 1) merge_parts(task, static_cast<int>(r));
}

void causal_attention_reference(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                                std::span<const AttentionRow> rows, const AttentionShape& s) {
  check(rows, s);
  auto key = [](const KVBlocks& kv, int b, std::size_t at) { return kv.f16() ? f16_to_f32(kv.keys_f16[b][at]) : kv.keys[b][at]; };
  auto value = [](const KVBlocks& kv, int b, std::size_t at) {
    return kv.f16() ? f16_to_f32(kv.values_f16[b][at]) : kv.values[b][at];
  };
  const int hd = s.head_dim, group = s.heads / s.kv_heads;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const AttentionRow& row = rows[r];
    const int bs = row.kv->block_size;
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / group;
      std::vector<double> scores(row.position + 1, 0.0);
      double max = -INFINITY;
      for (int j = row.first; j <= row.position; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[r * q_stride + h * hd + d]) * key(*row.kv, j / bs, key_offset(bs, hd, kvh, d, j % bs));
        scores[j] = dot * s.scale;
        max = std::max(max, scores[j]);
      }
      if (s.sinks) max = std::max(max, static_cast<double>(s.sinks[h]));
      double sum = s.sinks ? std::exp(s.sinks[h] - max) : 0.0;
      for (int j = row.first; j <= row.position; ++j) sum += (scores[j] = std::exp(scores[j] - max));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (int j = row.first; j <= row.position; ++j)
          o += scores[j] * value(*row.kv, j / bs, value_offset(s.kv_heads, hd, kvh, d, j % bs));
        out[r * out_stride + h * hd + d] = static_cast<float>(o / sum);
      }
    }
  }
}

}  // namespace inferlab::fast
