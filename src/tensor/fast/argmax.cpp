#include "inferlab/tensor/fast/argmax.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "inferlab/tensor/fast/cpu.h"
#include "tensor/fast/isa_target.h"

namespace inferlab::fast {

namespace {
// Elements [from, n) against the best so far, strictly greater only, so the first maximum stays.
std::size_t argmax_tail(const float* x, std::size_t from, std::size_t n, std::size_t best) {
  for (std::size_t i = from; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

// Lanes of running maxima and their first positions (each lane starting at x[0], position 0): the
// overall best value, and of the lanes holding it the smallest position, is the first maximum.
std::size_t best_of_lanes(const float* value, const int32_t* position, int lanes) {
  int pick = 0;
  for (int l = 1; l < lanes; ++l)
    if (value[l] > value[pick] || (value[l] == value[pick] && position[l] < position[pick])) pick = l;
  return static_cast<std::size_t>(position[pick]);
}
}  // namespace

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
namespace {
// Four independent sets of 16 lanes, so that no compare waits on the one before; positions in
// int32 (a row of logits is far below 2^31).
std::size_t argmax_avx512(const float* x, std::size_t n) {
  constexpr int kSets = 4, kWidth = 16;
  __m512 best[kSets];
  __m512i where[kSets];
  for (int s = 0; s < kSets; ++s) best[s] = _mm512_set1_ps(x[0]), where[s] = _mm512_setzero_si512();
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t i = 0;
  for (; i + kSets * kWidth <= n; i += kSets * kWidth)
    #pragma GCC unroll 4
    for (int s = 0; s < kSets; ++s) {
      const __m512 v = _mm512_loadu_ps(x + i + s * kWidth);
      const __mmask16 greater = _mm512_cmp_ps_mask(v, best[s], _CMP_GT_OQ);  // false for NaN
      best[s] = _mm512_mask_mov_ps(best[s], greater, v);
      where[s] = _mm512_mask_mov_epi32(where[s], greater,
                                       _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(i) + s * kWidth)));
    }
  alignas(64) float value[kSets * kWidth];
  alignas(64) int32_t position[kSets * kWidth];
  for (int s = 0; s < kSets; ++s) {
    _mm512_store_ps(value + s * kWidth, best[s]);
    _mm512_store_si512(position + s * kWidth, where[s]);
  }
  return argmax_tail(x, i, n, best_of_lanes(value, position, kSets * kWidth));
}
}  // namespace
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma")
namespace {
std::size_t argmax_avx2(const float* x, std::size_t n) {
  constexpr int kSets = 4, kWidth = 8;
  __m256 best[kSets];
  __m256i where[kSets];
  for (int s = 0; s < kSets; ++s) best[s] = _mm256_set1_ps(x[0]), where[s] = _mm256_setzero_si256();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::size_t i = 0;
  for (; i + kSets * kWidth <= n; i += kSets * kWidth)
    #pragma GCC unroll 4
    for (int s = 0; s < kSets; ++s) {
      const __m256 v = _mm256_loadu_ps(x + i + s * kWidth);
      const __m256 greater = _mm256_cmp_ps(v, best[s], _CMP_GT_OQ);  // false for NaN
      best[s] = _mm256_blendv_ps(best[s], v, greater);
      const __m256i here = _mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(i) + s * kWidth));
      where[s] = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(where[s]), _mm256_castsi256_ps(here), greater));
    }
  alignas(32) float value[kSets * kWidth];
  alignas(32) int32_t position[kSets * kWidth];
  for (int s = 0; s < kSets; ++s) {
    _mm256_store_ps(value + s * kWidth, best[s]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(position + s * kWidth), where[s]);
  }
  return argmax_tail(x, i, n, best_of_lanes(value, position, kSets * kWidth));
}
}  // namespace
INFERLAB_TARGET_END

std::size_t argmax(const float* x, std::size_t n) {
  if (std::isnan(x[0])) return 0;  // every compare with it is false: it stays the answer
  // Positions are held in int32 lanes; a longer row takes the scalar pass.
  if (n < (std::size_t(1) << 31)) {
    if (active_isa() >= Isa::Avx512) return argmax_avx512(x, n);
    if (active_isa() == Isa::Avx2) return argmax_avx2(x, n);
  }
  return argmax_tail(x, 1, n, 0);
}

}  // namespace inferlab::fast
