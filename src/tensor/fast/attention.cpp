#include "inferlab/tensor/fast/attention.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/simd_math.h"
#include "tensor/fast/isa_target.h"

namespace inferlab::fast {

namespace {

struct Task {
  const float* q;
  std::size_t q_stride;
  float* out;
  std::size_t out_stride;
  std::span<const AttentionRow> rows;
  AttentionShape shape;
};

// One (row, kv head): its group of query heads, online softmax over blocks of positions.
void attend_scalar(const Task& t, int row, int kv_head) {
  const AttentionShape& s = t.shape;
  const int hd = s.head_dim, group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd, bs = t.rows[row].kv->block_size;
  const AttentionRow& r = t.rows[row];
  std::vector<float> acc(static_cast<std::size_t>(group) * hd, 0.0f), scores(bs);
  std::vector<float> running_max(group, -std::numeric_limits<float>::infinity()), running_sum(group, 0.0f);
  // From the window's first position (mid-block, maybe) to the row's own, block by block.
  for (int j0 = r.first; j0 <= r.position; j0 = (j0 / bs + 1) * bs) {
    const int skip = j0 % bs, n = std::min(bs - skip, r.position + 1 - j0);
    const float* keys = r.kv->keys[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    const float* values = r.kv->values[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    for (int g = 0; g < group; ++g) {
      const int h = kv_head * group + g;
      const float* q = t.q + row * t.q_stride + h * hd;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int i = 0; i < n; ++i) {
        float dot = 0;
        for (int d = 0; d < hd; ++d) dot += q[d] * keys[i * kv_dim + d];
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
        for (int d = 0; d < hd; ++d) a[d] += e * values[i * kv_dim + d];
      }
      running_sum[g] = running_sum[g] * correction + sum;
      running_max[g] = new_max;
    }
  }
  for (int g = 0; g < group; ++g) {
    float* o = t.out + row * t.out_stride + (kv_head * group + g) * hd;
    const float inv = 1.0f / running_sum[g];
    for (int d = 0; d < hd; ++d) o[d] = acc[static_cast<std::size_t>(g) * hd + d] * inv;
  }
}

}  // namespace

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

constexpr int kMaxHeadVectors = 16;  // head_dim up to 256
constexpr int kMaxGroup = 16;

// r[i] = the sum of a[i]'s 16 lanes, for 16 vectors at once: a transpose-and-add tree (45
// instructions instead of 16 horizontal reductions of about 9 each).
inline __m512 sum_each(const __m512 a[16]) {
  __m512 pairs[8];  // per 128-bit lane L: [a(2j) 0+2, a(2j+1) 0+2, a(2j) 1+3, a(2j+1) 1+3]
  for (int j = 0; j < 8; ++j)
    pairs[j] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * j], a[2 * j + 1]), _mm512_unpackhi_ps(a[2 * j], a[2 * j + 1]));
  __m512 quads[4];  // per lane L: the lane-L sums of a(4j) .. a(4j+3)
  for (int j = 0; j < 4; ++j) {
    const __m512d x = _mm512_castps_pd(pairs[2 * j]), y = _mm512_castps_pd(pairs[2 * j + 1]);
    quads[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  __m512 halves[2];  // lanes: [a(8j)..+3 over L0+L1, same over L2+L3, a(8j+4)..+7 over L0+L1, over L2+L3]
  for (int j = 0; j < 2; ++j)
    halves[j] = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2 * j], quads[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(quads[2 * j], quads[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(halves[0], halves[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(halves[0], halves[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// As attend_scalar, with head_dim = 16 * NV and chunks of 16 positions handled as one vector of
// scores. Every loop over positions or head vectors has independent accumulators (an FMA chain
// per position for the scores, two per head vector for the values): a single chain would run at
// the FMA's latency, not its throughput.
template <int NV>
void attend_avx512(const Task& t, int row, int kv_head) {
  const AttentionShape& s = t.shape;
  constexpr int hd = NV * 16;
  const int group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd;
  const int bs = t.rows[row].kv->block_size;
  const AttentionRow& r = t.rows[row];
  alignas(64) float acc[kMaxGroup][NV * 16];
  alignas(64) float scores[16];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  for (int g = 0; g < group; ++g) {
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0;
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_store_ps(&acc[g][v * 16], _mm512_setzero_ps());
  }
  for (int j0 = r.first; j0 <= r.position; j0 = (j0 / bs + 1) * bs) {
    const int skip = j0 % bs;  // positions before the window's first, in its first block
    const float* keys_base = r.kv->keys[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    const float* values_base = r.kv->values[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    const int block_n = std::min(bs - skip, r.position + 1 - j0);
    for (int c0 = 0; c0 < block_n; c0 += 16) {  // chunks of 16 positions (block sizes above 16)
      const int n = std::min(16, block_n - c0);
      // Positions past n read position n-1 (inside the block) and are masked out of the scores.
      const float* key[16];
      const float* value[16];
      #pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const std::size_t at = static_cast<std::size_t>(c0 + std::min(i, n - 1)) * kv_dim;
        key[i] = keys_base + at;
        value[i] = values_base + at;
      }
      const __mmask16 valid = n == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
      for (int g = 0; g < group; ++g) {
        const float* q = t.q + row * t.q_stride + (kv_head * group + g) * hd;
        __m512 dots[16];
        #pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) dots[i] = _mm512_setzero_ps();
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          const __m512 qv = _mm512_loadu_ps(q + v * 16);
          #pragma GCC unroll 16
          for (int i = 0; i < 16; ++i) dots[i] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(key[i] + v * 16), dots[i]);
        }
        __m512 sv = _mm512_mul_ps(sum_each(dots), _mm512_set1_ps(s.scale));
        sv = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), sv);
        const float new_max = std::max(running_max[g], _mm512_reduce_max_ps(sv));
        const float correction = std::exp(running_max[g] - new_max);
        const __m512 e = _mm512_maskz_mov_ps(valid, detail::exp512(_mm512_sub_ps(sv, _mm512_set1_ps(new_max))));
        _mm512_store_ps(scores, e);  // lanes past n are 0
        running_sum[g] = running_sum[g] * correction + _mm512_reduce_add_ps(e);
        running_max[g] = new_max;
        const __m512 corr = _mm512_set1_ps(correction);
        __m512 even[NV], odd[NV];
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) even[v] = _mm512_mul_ps(_mm512_load_ps(&acc[g][v * 16]), corr), odd[v] = _mm512_setzero_ps();
        for (int i = 0; i < n; i += 2) {  // i + 1 == n reads a zero score
          const __m512 s0 = _mm512_set1_ps(scores[i]), s1 = _mm512_set1_ps(scores[i + 1]);
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) {
            even[v] = _mm512_fmadd_ps(s0, _mm512_loadu_ps(value[i] + v * 16), even[v]);
            odd[v] = _mm512_fmadd_ps(s1, _mm512_loadu_ps(value[i + 1] + v * 16), odd[v]);
          }
        }
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) _mm512_store_ps(&acc[g][v * 16], _mm512_add_ps(even[v], odd[v]));
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    float* o = t.out + row * t.out_stride + (kv_head * group + g) * hd;
    const __m512 inv = _mm512_set1_ps(1.0f / running_sum[g]);
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(o + v * 16, _mm512_mul_ps(_mm512_load_ps(&acc[g][v * 16]), inv));
  }
}

using AttendFn = void (*)(const Task&, int, int);
template <int... NV>
constexpr std::array<AttendFn, sizeof...(NV)> attend_table(std::integer_sequence<int, NV...>) {
  return {attend_avx512<NV + 1>...};
}
// [head_dim / 16 - 1], head_dim 16 .. 256.
constexpr auto kAttendAvx512 = attend_table(std::make_integer_sequence<int, kMaxHeadVectors>{});

}  // namespace
#pragma GCC diagnostic pop
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma")
namespace {

constexpr int kMaxHeadVectors8 = 32;  // head_dim up to 256 in vectors of 8

// r[i] = the sum of a[i]'s 8 lanes, for 8 vectors at once.
inline __m256 sum_each8(const __m256 a[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);  // [a0..a3 low, a4..a7 low | highs]
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// attend_avx512 on 8 lanes: head_dim = 8 * NV, chunks of 8 positions. One accumulator per head
// vector for the values (NV chains; two sets would not fit the 16 ymm registers at head_dim 64).
template <int NV>
void attend_avx2(const Task& t, int row, int kv_head) {
  const AttentionShape& s = t.shape;
  constexpr int hd = NV * 8;
  const int group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd;
  const int bs = t.rows[row].kv->block_size;
  const AttentionRow& r = t.rows[row];
  alignas(32) float acc[kMaxGroup][NV * 8];
  alignas(32) float scores[8];
  float running_max[kMaxGroup], running_sum[kMaxGroup];
  for (int g = 0; g < group; ++g) {
    running_max[g] = -std::numeric_limits<float>::infinity();
    running_sum[g] = 0;
    #pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) _mm256_store_ps(&acc[g][v * 8], _mm256_setzero_ps());
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int j0 = r.first; j0 <= r.position; j0 = (j0 / bs + 1) * bs) {
    const int skip = j0 % bs;  // positions before the window's first, in its first block
    const float* keys_base = r.kv->keys[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    const float* values_base = r.kv->values[j0 / bs] + static_cast<std::size_t>(skip) * kv_dim + kv_head * hd;
    const int block_n = std::min(bs - skip, r.position + 1 - j0);
    for (int c0 = 0; c0 < block_n; c0 += 8) {
      const int n = std::min(8, block_n - c0);
      // Positions past n read position n-1 (inside the block) and are masked out of the scores.
      const float* key[8];
      const float* value[8];
      #pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const std::size_t at = static_cast<std::size_t>(c0 + std::min(i, n - 1)) * kv_dim;
        key[i] = keys_base + at;
        value[i] = values_base + at;
      }
      const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
      for (int g = 0; g < group; ++g) {
        const float* q = t.q + row * t.q_stride + (kv_head * group + g) * hd;
        __m256 dots[8];
        #pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) dots[i] = _mm256_setzero_ps();
        #pragma GCC unroll 32
        for (int v = 0; v < NV; ++v) {
          const __m256 qv = _mm256_loadu_ps(q + v * 8);
          #pragma GCC unroll 8
          for (int i = 0; i < 8; ++i) dots[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(key[i] + v * 8), dots[i]);
        }
        __m256 sv = _mm256_mul_ps(sum_each8(dots), _mm256_set1_ps(s.scale));
        sv = _mm256_blendv_ps(_mm256_set1_ps(-std::numeric_limits<float>::infinity()), sv, valid);
        const float new_max = std::max(running_max[g], detail::hmax256(sv));
        const float correction = std::exp(running_max[g] - new_max);
        const __m256 e = _mm256_and_ps(detail::exp256(_mm256_sub_ps(sv, _mm256_set1_ps(new_max))), valid);
        _mm256_store_ps(scores, e);  // lanes past n are 0
        running_sum[g] = running_sum[g] * correction + detail::hsum256(e);
        running_max[g] = new_max;
        const __m256 corr = _mm256_set1_ps(correction);
        __m256 out[NV];
        #pragma GCC unroll 32
        for (int v = 0; v < NV; ++v) out[v] = _mm256_mul_ps(_mm256_load_ps(&acc[g][v * 8]), corr);
        for (int i = 0; i < n; ++i) {
          const __m256 si = _mm256_set1_ps(scores[i]);
          #pragma GCC unroll 32
          for (int v = 0; v < NV; ++v) out[v] = _mm256_fmadd_ps(si, _mm256_loadu_ps(value[i] + v * 8), out[v]);
        }
        #pragma GCC unroll 32
        for (int v = 0; v < NV; ++v) _mm256_store_ps(&acc[g][v * 8], out[v]);
      }
    }
  }
  for (int g = 0; g < group; ++g) {
    float* o = t.out + row * t.out_stride + (kv_head * group + g) * hd;
    const __m256 inv = _mm256_set1_ps(1.0f / running_sum[g]);
    #pragma GCC unroll 32
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(o + v * 8, _mm256_mul_ps(_mm256_load_ps(&acc[g][v * 8]), inv));
  }
}

template <int... NV>
constexpr std::array<AttendFn, sizeof...(NV)> attend_table_avx2(std::integer_sequence<int, NV...>) {
  return {attend_avx2<NV + 1>...};
}
// [head_dim / 8 - 1], head_dim 8 .. 256.
constexpr auto kAttendAvx2 = attend_table_avx2(std::make_integer_sequence<int, kMaxHeadVectors8>{});

}  // namespace
INFERLAB_TARGET_END

namespace {
void check(std::span<const AttentionRow> rows, const AttentionShape& s) {
  if (s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 || s.heads % s.kv_heads != 0)
    fail("attention: {} heads over {} kv heads of dim {} is not a valid shape", s.heads, s.kv_heads, s.head_dim);
  for (const auto& r : rows) {
    if (!r.kv || r.kv->block_size <= 0) fail("attention: a row without KV blocks");
    if (r.position < 0 || static_cast<std::size_t>(r.position / r.kv->block_size) >= r.kv->keys.size())
      fail("attention: position {} has no KV block in its sequence ({} blocks)", r.position, r.kv->keys.size());
    if (r.first < 0 || r.first > r.position)
      fail("attention: window start {} is outside positions 0..{}", r.first, r.position);
  }
}
}  // namespace

void causal_attention(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                      std::span<const AttentionRow> rows, const AttentionShape& shape) {
  check(rows, shape);
  const Task task{q, q_stride, out, out_stride, rows, shape};
  const int group = shape.heads / shape.kv_heads;
  AttendFn attend = attend_scalar;
  if (active_isa() == Isa::Avx512 && shape.head_dim % 16 == 0 && shape.head_dim <= 16 * kMaxHeadVectors && group <= kMaxGroup)
    attend = kAttendAvx512[shape.head_dim / 16 - 1];
  else if (active_isa() >= Isa::Avx2 && shape.head_dim % 8 == 0 && shape.head_dim <= 8 * kMaxHeadVectors8 && group <= kMaxGroup)
    attend = kAttendAvx2[shape.head_dim / 8 - 1];
  const int tasks = static_cast<int>(rows.size()) * shape.kv_heads;
  ThreadPool& pool = kernel_pool();
  if (pool.size() == 1 || tasks == 1) {
    for (int i = 0; i < tasks; ++i) attend(task, i / shape.kv_heads, i % shape.kv_heads);
    return;
  }
  // Claimed one (row, kv head) at a time: later rows of a causal prompt see more positions, and a
  // thread the OS delays leaves its share to the others.
  pool.run_chunks(tasks, [&](int64_t i) { attend(task, static_cast<int>(i / shape.kv_heads), static_cast<int>(i % shape.kv_heads)); });
}

void causal_attention_reference(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                                std::span<const AttentionRow> rows, const AttentionShape& s) {
  check(rows, s);
  const int hd = s.head_dim, group = s.heads / s.kv_heads, kv_dim = s.kv_heads * hd;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const AttentionRow& row = rows[r];
    const int bs = row.kv->block_size;
    for (int h = 0; h < s.heads; ++h) {
      const int kvh = h / group;
      std::vector<double> scores(row.position + 1, 0.0);
      double max = -INFINITY;
      for (int j = row.first; j <= row.position; ++j) {
        const float* k = row.kv->keys[j / bs] + static_cast<std::size_t>(j % bs) * kv_dim + kvh * hd;
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[r * q_stride + h * hd + d]) * k[d];
        scores[j] = dot * s.scale;
        max = std::max(max, scores[j]);
      }
      double sum = 0;
      for (int j = row.first; j <= row.position; ++j) sum += (scores[j] = std::exp(scores[j] - max));
      for (int d = 0; d < hd; ++d) {
        double o = 0;
        for (int j = row.first; j <= row.position; ++j)
          o += scores[j] * row.kv->values[j / bs][static_cast<std::size_t>(j % bs) * kv_dim + kvh * hd + d];
        out[r * out_stride + h * hd + d] = static_cast<float>(o / sum);
      }
    }
  }
}

}  // namespace inferlab::fast
