// Q4_K, Q5_K and Q6_K weight rows kept as stored in the blocks format (a K-quant part fused with a
// float or blocks part; on their own, and beside other panel formats, they run from their panels,
// kquant_panels.cpp) dotted with activations quantized to int8 per 32 (PreparedInput's q8, scale
// and sum), in integer dot products: vpdpbusd (AVX-512 VNNI), vpmaddubsw + vpmaddwd (AVX2), plain
// loops (scalar), one weight row at a time. Every instruction set computes the same values:
//   lane L (0-15) of each 64 weights holds the exact int32 sum of code * x over weights 4L..4L+3;
//   acc[L] = fma(float(that sum), (d * sc) * x scale, acc[L]), sc the scale of those weights'
//   run (32 weights in Q4_K / Q5_K, 16 in Q6_K) and x scale that of their activations' 32-block;
//   Q4_K's and Q5_K's mins: per sub-block j (0-7) of every super-block, mins[j] = fma((dmin * m) * x scale,
//   float(sum of the block's x codes), mins[j]);
//   the result: acc's 16 lanes reduced in the blocks kernels' tree (reduce16), minus mins' 8 lanes
//   reduced likewise (reduce8; kernels_internal.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/float16.h"
#include "tensor/fast/isa_target.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast::detail {
namespace {

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

// Q4_K's 8 scales and 8 mins of a super-block from its 12 packed bytes (ggml_k4_scale_min's
// layout), four at a time in 32-bit words: bytes j of the results are sub-blocks j and j + 4.
struct K4ScalesMins {
  uint32_t scales_low, scales_high, mins_low, mins_high;  // sub-blocks 0-3, 4-7
};
inline K4ScalesMins k4_scales_mins(const uint8_t* packed) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, packed, 4), std::memcpy(&w1, packed + 4, 4), std::memcpy(&w2, packed + 8, 4);
  return {w0 & 0x3f3f3f3fu, (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u), w1 & 0x3f3f3f3fu,
          ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u)};
}

// Q4_K: 64 weights per chunk c, sub-block 2c (low nibbles, lanes 0-7) and 2c + 1 (high nibbles,
// lanes 8-15); weight = (d * sc) * code - dmin * m, codes 0..15. Q5_K (Fifth): the same with a
// fifth bit per weight, bit j of qh[l] for weight l of sub-block j, codes 0..31.
template <bool Fifth>
constexpr int kK4Bytes = Fifth ? 176 : 144;
template <bool Fifth>
constexpr int kK4Codes = Fifth ? 48 : 16;  // offset of the nibbles in a super-block

template <bool Fifth>
float q4_k_dot_scalar_row(const uint8_t* w, const int8_t* xq, const float* xs, const int32_t* xsum, int n) {
  float acc[16] = {}, mins[8] = {};
  for (int s = 0; s < n / 256; ++s, w += kK4Bytes<Fifth>, xq += 256, xs += 8, xsum += 8) {
    const float d = half_at(w), dmin = half_at(w + 2);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      ggml_k4_scale_min(j, w + 4, sc, m);
      const float scale = (d * sc) * xs[j];
      const int c = j / 2, h = j % 2;
      for (int lane = 0; lane < 8; ++lane) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) {
          const int l = 4 * lane + t;
          const uint8_t byte = w[kK4Codes<Fifth> + 32 * c + l];
          const int fifth = Fifth ? ((w[16 + l] >> j) & 1) << 4 : 0;
          sum += ((h ? byte >> 4 : byte & 0x0f) | fifth) * xq[32 * j + l];
        }
        acc[8 * h + lane] = std::fma(static_cast<float>(sum), scale, acc[8 * h + lane]);
      }
      mins[j] = std::fma((dmin * m) * xs[j], static_cast<float>(xsum[j]), mins[j]);
    }
  }
  return reduce16(acc) - reduce8(mins);
}

// Q6_K: 64 weights per group g (half h = g / 2, its quarters q0 = 2 * (g % 2) and q0 + 1), four
// runs of 16 (lanes 4r..4r + 3, scale sc[8h + 2 * q0 + r]); weight = (d * sc) * (code - 32),
// codes 0..63.
float q6_k_dot_scalar_row(const uint8_t* w, const int8_t* xq, const float* xs, const int32_t*, int n) {
  float acc[16] = {};
  for (int s = 0; s < n / 256; ++s, w += 210, xq += 256, xs += 8) {
    const uint8_t* ql = w;
    const uint8_t* qh = w + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(w + 192);
    const float d = half_at(w + 208);
    for (int g = 0; g < 4; ++g) {
      const int h = g / 2, q0 = 2 * (g % 2);
      for (int lane = 0; lane < 16; ++lane) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) {
          const int o = 4 * lane + t, quarter = q0 + o / 32, e = o % 32;
          const int low = (ql[64 * h + 32 * (quarter % 2) + e] >> (quarter >= 2 ? 4 : 0)) & 0x0f;
          const int code = low | (((qh[32 * h + e] >> (2 * quarter)) & 3) << 4);
          sum += (code - 32) * xq[64 * g + o];
        }
        const int run = lane / 4;
        const float scale = (d * static_cast<float>(sc[8 * h + 2 * q0 + run])) * xs[2 * g + run / 2];
        acc[lane] = std::fma(static_cast<float>(sum), scale, acc[lane]);
      }
    }
  }
  return reduce16(acc);
}

template <float (*Row)(const uint8_t*, const int8_t*, const float*, const int32_t*, int)>
void rows_scalar(const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int i = 0; i < wt.count; ++i)
    for (int a = 0; a < x.rows; ++a)
      wt.out[a * wt.out_stride + i] = Row(wt.rows + i * wt.row_bytes, x.q8 + a * x.q8_stride, x.scale + a * x.blocks_stride,
                                          x.sum + a * x.blocks_stride, n) +
                                      (wt.bias ? wt.bias[i] : 0.0f);
}

}  // namespace

// Helpers of both kernel regions below (the AVX-512 one includes these instructions, so they
// inline there too).
INFERLAB_TARGET_BEGIN("avx2,fma,f16c")
namespace {

inline float half_f16c(const uint8_t* p) {  // exact, as f16_to_f32
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}
// 8 bytes (sub-blocks 0-7) as floats.
inline __m256 bytes8(uint32_t low, uint32_t high) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>((static_cast<uint64_t>(high) << 32) | low))));
}
// reduce8's tree on one ymm, reduce16's on two (lanes 0-7, 8-15).
inline float reduce8_ymm(__m256 m) { return reduce4(_mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1))); }
inline float reduce16_ymm(__m256 lo, __m256 hi) { return reduce8_ymm(_mm256_add_ps(lo, hi)); }

}  // namespace
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

// reduce16's tree on one zmm.
inline float reduce16_avx512(__m512 acc) { return reduce16_ymm(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)); }

// Up to kIntDotRows activation rows at once (R): the weights' codes and scales are decoded once
// for them (6: 8 spilled registers, pp64 of a Q4_K_M file 337 -> 238 t/s; 4 was 10 % slower than 6).
template <bool Fifth, int R>
void q4_k_rows_avx512_t(const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int i = 0; i < wt.count; ++i) {
    const uint8_t* w = wt.rows + i * wt.row_bytes;
    __m512 acc[R];
    __m256 mins[R];
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) acc[a] = _mm512_setzero_ps(), mins[a] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    // Lanes 0-7 take sub-block 2c's scale, 8-15 sub-block 2c + 1's.
    const __m512i pair[4] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                             _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
                             _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};
    const __m256i one = _mm256_set1_epi8(1);
    for (int s = 0; s < n / 256; ++s, w += kK4Bytes<Fifth>) {
      const K4ScalesMins packed = k4_scales_mins(w + 4);
      const __m256i fifths = Fifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16)) : _mm256_setzero_si256();
      const __m256 d_sc = _mm256_mul_ps(_mm256_set1_ps(half_f16c(w)), bytes8(packed.scales_low, packed.scales_high));
      const __m256 dmin_m = _mm256_mul_ps(_mm256_set1_ps(half_f16c(w + 2)), bytes8(packed.mins_low, packed.mins_high));
      __m512 scale[R];
      #pragma GCC unroll 8
      for (int a = 0; a < R; ++a) {
        const __m256 xs = _mm256_loadu_ps(x.scale + a * x.blocks_stride + 8 * s);
        scale[a] = _mm512_castps256_ps512(_mm256_mul_ps(d_sc, xs));
        mins[a] = _mm256_fmadd_ps(_mm256_mul_ps(dmin_m, xs),
                                  _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sum + a * x.blocks_stride + 8 * s))),
                                  mins[a]);
      }
      #pragma GCC unroll 8
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kK4Codes<Fifth> + 32 * c));
        __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        if constexpr (Fifth) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifths, 2 * c), one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifths, 2 * c + 1), one), 4));
        }
        const __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        #pragma GCC unroll 8
        for (int a = 0; a < R; ++a) {
          const __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, _mm512_loadu_si512(x.q8 + a * x.q8_stride + 256 * s + 64 * c));
          acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(pair[c], scale[a]), acc[a]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) wt.out[a * wt.out_stride + i] = reduce16_avx512(acc[a]) - reduce8_ymm(mins[a]) + (wt.bias ? wt.bias[i] : 0.0f);
  }
}

template <int R>
void q6_k_rows_avx512_t(const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int i = 0; i < wt.count; ++i) {
    const uint8_t* w = wt.rows + i * wt.row_bytes;
    __m512 acc[R];
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) acc[a] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(0x03), offset = _mm512_set1_epi8(32);
    // The 16 runs' activation blocks (2 runs per 32-block), and each group's 4 runs over 16 lanes.
    const __m512i block_of_run = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i runs[4] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                             _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
                             _mm512_setr_epi32(8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11),
                             _mm512_setr_epi32(12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15)};
    for (int s = 0; s < n / 256; ++s, w += 210) {
      // Run r's scale sc[r]: group g (quarters q0 = 2 * (g % 2), q0 + 1 of half g / 2) holds runs 4g..4g + 3.
      const __m512 d_sc = _mm512_mul_ps(_mm512_set1_ps(half_f16c(w + 208)),
                                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 192)))));
      __m512 scale[R];
      #pragma GCC unroll 8
      for (int a = 0; a < R; ++a)
        scale[a] = _mm512_mul_ps(d_sc, _mm512_permutexvar_ps(block_of_run, _mm512_castps256_ps512(_mm256_loadu_ps(x.scale + a * x.blocks_stride + 8 * s))));
      #pragma GCC unroll 8
      for (int g = 0; g < 4; ++g) {
        const int h = g / 2, q0 = 2 * (g % 2);
        __m512i low = _mm512_loadu_si512(w + 64 * h);  // quarters q0, q0 + 1: ql[0..31], ql[32..63]
        if (q0 == 2) low = _mm512_srli_epi16(low, 4);
        const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 128 + 32 * h));
        const __m512i tops = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_srli_epi16(top, 2 * q0)),
                                                _mm256_srli_epi16(top, 2 * q0 + 2), 1);
        const __m512i codes = _mm512_or_si512(_mm512_and_si512(low, low4), _mm512_slli_epi16(_mm512_and_si512(tops, two), 4));
        #pragma GCC unroll 8
        for (int a = 0; a < R; ++a) {
          const __m512i xv = _mm512_loadu_si512(x.q8 + a * x.q8_stride + 256 * s + 64 * g);
          const __m512i sum = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, xv),
                                               _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xv));
          acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_permutexvar_ps(runs[g], scale[a]), acc[a]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) wt.out[a * wt.out_stride + i] = reduce16_avx512(acc[a]) + (wt.bias ? wt.bias[i] : 0.0f);
  }
}

template <bool Fifth>
void q4_k_rows_avx512(const IntDotWeights& wt, const IntDotRows& x, int n) {
  static constexpr GgmlIntDotFn fn[6] = {q4_k_rows_avx512_t<Fifth, 1>, q4_k_rows_avx512_t<Fifth, 2>, q4_k_rows_avx512_t<Fifth, 3>,
                                         q4_k_rows_avx512_t<Fifth, 4>, q4_k_rows_avx512_t<Fifth, 5>, q4_k_rows_avx512_t<Fifth, 6>};
  fn[x.rows - 1](wt, x, n);
}
void q6_k_rows_avx512(const IntDotWeights& wt, const IntDotRows& x, int n) {
  static constexpr GgmlIntDotFn fn[6] = {q6_k_rows_avx512_t<1>, q6_k_rows_avx512_t<2>, q6_k_rows_avx512_t<3>, q6_k_rows_avx512_t<4>,
                                         q6_k_rows_avx512_t<5>, q6_k_rows_avx512_t<6>};
  fn[x.rows - 1](wt, x, n);
}

}  // namespace
#pragma GCC diagnostic pop
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma,f16c")
namespace {

// 8 lanes of exact int32 sums of 4 consecutive u8 * s8 products (no saturation: |2 * 63 * 127| fits
// the 16-bit step).
inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)); }

// The AVX2 kernels take up to 4 activation rows (16 ymm registers): more go 4 at a time.
void in_fours(const GgmlIntDotFn* fn, const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int a = 0; a < x.rows; a += 4) {
    IntDotRows part = x;
    part.q8 += a * x.q8_stride, part.scale += a * x.blocks_stride, part.sum += a * x.blocks_stride;
    part.rows = std::min(4, x.rows - a);
    IntDotWeights out = wt;
    out.out += a * wt.out_stride;
    fn[part.rows - 1](out, part, n);
  }
}

template <bool Fifth, int R>
void q4_k_rows_avx2_t(const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int i = 0; i < wt.count; ++i) {
    const uint8_t* w = wt.rows + i * wt.row_bytes;
    __m256 acc_lo[R], acc_hi[R], mins[R];
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) acc_lo[a] = acc_hi[a] = mins[a] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i one = _mm256_set1_epi8(1);
    for (int s = 0; s < n / 256; ++s, w += kK4Bytes<Fifth>) {
      const K4ScalesMins packed = k4_scales_mins(w + 4);
      const __m256i fifths = Fifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16)) : _mm256_setzero_si256();
      const __m256 d_sc = _mm256_mul_ps(_mm256_set1_ps(half_f16c(w)), bytes8(packed.scales_low, packed.scales_high));
      const __m256 dmin_m = _mm256_mul_ps(_mm256_set1_ps(half_f16c(w + 2)), bytes8(packed.mins_low, packed.mins_high));
      alignas(32) float scale[R][8];
      #pragma GCC unroll 8
      for (int a = 0; a < R; ++a) {
        const __m256 xs = _mm256_loadu_ps(x.scale + a * x.blocks_stride + 8 * s);
        _mm256_store_ps(scale[a], _mm256_mul_ps(d_sc, xs));
        mins[a] = _mm256_fmadd_ps(_mm256_mul_ps(dmin_m, xs),
                                  _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sum + a * x.blocks_stride + 8 * s))),
                                  mins[a]);
      }
      for (int c = 0; c < 4; ++c) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kK4Codes<Fifth> + 32 * c));
        __m256i lo = _mm256_and_si256(raw, low4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        if constexpr (Fifth) {
          lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifths, 2 * c), one), 4));
          hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(fifths, 2 * c + 1), one), 4));
        }
        #pragma GCC unroll 8
        for (int a = 0; a < R; ++a) {
          const int8_t* xq = x.q8 + a * x.q8_stride + 256 * s + 64 * c;
          const __m256i sum_lo = dot_u8s8(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
          const __m256i sum_hi = dot_u8s8(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)));
          acc_lo[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_lo), _mm256_broadcast_ss(&scale[a][2 * c]), acc_lo[a]);
          acc_hi[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_hi), _mm256_broadcast_ss(&scale[a][2 * c + 1]), acc_hi[a]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) wt.out[a * wt.out_stride + i] = reduce16_ymm(acc_lo[a], acc_hi[a]) - reduce8_ymm(mins[a]) + (wt.bias ? wt.bias[i] : 0.0f);
  }
}

template <int R>
void q6_k_rows_avx2_t(const IntDotWeights& wt, const IntDotRows& x, int n) {
  for (int i = 0; i < wt.count; ++i) {
    const uint8_t* w = wt.rows + i * wt.row_bytes;
    __m256 acc[4][2];
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x03), offset = _mm256_set1_epi8(32);
    for (int s = 0; s < n / 256; ++s, w += 210) {
      const int8_t* sc = reinterpret_cast<const int8_t*>(w + 192);
      const float d = half_f16c(w + 208);
      for (int g = 0; g < 4; ++g) {
        const int h = g / 2, q0 = 2 * (g % 2);
        const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 128 + 32 * h));
        for (int half = 0; half < 2; ++half) {  // quarter q0 + half: lanes 8 * half ..
          const int quarter = q0 + half;
          __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * h + 32 * (quarter % 2)));
          if (quarter >= 2) low = _mm256_srli_epi16(low, 4);
          const __m256i codes = _mm256_or_si256(_mm256_and_si256(low, low4),
                                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(top, 2 * quarter), two), 4));
          const float r0 = d * static_cast<float>(sc[8 * h + 2 * q0 + 2 * half]);  // exact
          const float r1 = d * static_cast<float>(sc[8 * h + 2 * q0 + 2 * half + 1]);
          const int j = 8 * s + 2 * g + half;
          #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) {
            const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q8 + a * x.q8_stride + 32 * j));
            const __m256i sum = _mm256_sub_epi32(dot_u8s8(codes, xv), dot_u8s8(offset, xv));
            const float x_scale = x.scale[a * x.blocks_stride + j];
            acc[a][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set_m128(_mm_set1_ps(r1 * x_scale), _mm_set1_ps(r0 * x_scale)),
                                           acc[a][half]);
          }
        }
      }
    }
    #pragma GCC unroll 8
    for (int a = 0; a < R; ++a) wt.out[a * wt.out_stride + i] = reduce16_ymm(acc[a][0], acc[a][1]) + (wt.bias ? wt.bias[i] : 0.0f);
  }
}

template <bool Fifth>
void q4_k_rows_avx2(const IntDotWeights& wt, const IntDotRows& x, int n) {
  static constexpr GgmlIntDotFn fn[4] = {q4_k_rows_avx2_t<Fifth, 1>, q4_k_rows_avx2_t<Fifth, 2>, q4_k_rows_avx2_t<Fifth, 3>,
                                         q4_k_rows_avx2_t<Fifth, 4>};
  in_fours(fn, wt, x, n);
}
void q6_k_rows_avx2(const IntDotWeights& wt, const IntDotRows& x, int n) {
  static constexpr GgmlIntDotFn fn[4] = {q6_k_rows_avx2_t<1>, q6_k_rows_avx2_t<2>, q6_k_rows_avx2_t<3>, q6_k_rows_avx2_t<4>};
  in_fours(fn, wt, x, n);
}

}  // namespace
INFERLAB_TARGET_END

GgmlIntDotFn ggml_int_row_dot(uint32_t type, Isa isa) {
  switch (type) {
    case kGgmlQ4_K:
      return isa >= Isa::Avx512 ? q4_k_rows_avx512<false> : isa == Isa::Avx2 ? q4_k_rows_avx2<false> : rows_scalar<q4_k_dot_scalar_row<false>>;
    case kGgmlQ5_K:
      return isa >= Isa::Avx512 ? q4_k_rows_avx512<true> : isa == Isa::Avx2 ? q4_k_rows_avx2<true> : rows_scalar<q4_k_dot_scalar_row<true>>;
    case kGgmlQ6_K: return isa >= Isa::Avx512 ? q6_k_rows_avx512 : isa == Isa::Avx2 ? q6_k_rows_avx2 : rows_scalar<q6_k_dot_scalar_row>;
    default: return nullptr;
  }
}

}  // namespace inferlab::fast::detail
