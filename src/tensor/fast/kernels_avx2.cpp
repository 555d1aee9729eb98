// AVX2 + FMA kernels: the same arithmetic as the AVX-512 ones (bf16 pairs as two fp32 FMAs, int8
// dot products via maddubs), for CPUs without AVX-512 BF16 / VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tensor/fast/kernels_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace inferlab::fast::detail {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void store8(const KernelArgs& a, int row, int col, __m256 acc) {
  const int out = a.w->out();
  const int n = std::min(8, out - col);
  if (n <= 0) return;
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, acc);
  float* dst = a.y + static_cast<std::size_t>(row) * out + col;
  for (int i = 0; i < n; ++i) dst[i] = tmp[i] + (a.bias ? a.bias[col + i] : 0.0f);
}

template <int MR>
void bf16_tile(const KernelArgs& a, int row0, int panel) {
  const PackedMatrix& w = *a.w;
  const std::size_t ldx = w.in_padded();
  const uint16_t* x = a.in->bf16.data() + row0 * ldx;
  const uint8_t* wp = w.panel_data(panel);
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int kp = 0; kp < w.in_padded() / 2; ++kp) {
    __m256 odd[2], even[2];
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + kp * 64 + h * 32));
      odd[h] = _mm256_castsi256_ps(_mm256_and_si256(raw, high));
      even[h] = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    }
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256i pair = _mm256_set1_epi32(load_i32(x + m * ldx + 2 * kp));
      const __m256 xodd = _mm256_castsi256_ps(_mm256_and_si256(pair, high));
      const __m256 xeven = _mm256_castsi256_ps(_mm256_slli_epi32(pair, 16));
      #pragma GCC unroll 16
      for (int h = 0; h < 2; ++h) {
        acc[m][h] = _mm256_fmadd_ps(odd[h], xodd, acc[m][h]);
        acc[m][h] = _mm256_fmadd_ps(even[h], xeven, acc[m][h]);
      }
    }
  }
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) store8(a, row0 + m, panel * kPanel + h * 8, acc[m][h]);
}

template <int MR, bool Q8>
void quant_tile(const KernelArgs& a, int row0, int panel) {
  const PackedMatrix& w = *a.w;
  const std::size_t ldx = w.in_padded();
  const int blocks = w.blocks();
  const int8_t* x = a.in->q8.data() + row0 * ldx;
  const float* xscale = a.in->scale.data() + static_cast<std::size_t>(row0) * blocks;
  const int32_t* xsum = a.in->sum.data() + static_cast<std::size_t>(row0) * blocks;
  const uint8_t* wp = w.panel_data(panel);
  const uint16_t* sp = w.panel_scales(panel);
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80)),
                low_nibbles = _mm256_set1_epi8(0x0f);
  __m256 acc[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    __m256i isum[MR][2];
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m)
      // q8 codes are turned back into signed values below; 4-bit codes keep their +8 offset.
      isum[m][0] = isum[m][1] = _mm256_set1_epi32(Q8 ? 0 : -8 * xsum[m * blocks + b]);
    const int8_t* xb = x + b * kBlock;
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      if constexpr (Q8) {
        #pragma GCC unroll 16
        for (int q = 0; q < 8; ++q) {
          const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 512 + q * 64 + h * 32));
          const __m256i signed_w = _mm256_xor_si256(raw, flip);
          const __m256i abs_w = _mm256_abs_epi8(signed_w);
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m) {
            const __m256i xv = _mm256_set1_epi32(load_i32(xb + m * ldx + q * 4));
            const __m256i pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(xv, signed_w));
            isum[m][h] = _mm256_add_epi32(isum[m][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      } else {
        #pragma GCC unroll 16
        for (int g = 0; g < 4; ++g) {
          const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 256 + g * 64 + h * 32));
          const __m256i lo = _mm256_and_si256(raw, low_nibbles);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles);
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m) {
            const __m256i xlo = _mm256_set1_epi32(load_i32(xb + m * ldx + g * 4));
            const __m256i xhi = _mm256_set1_epi32(load_i32(xb + m * ldx + (g + 4) * 4));
            const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
            isum[m][h] = _mm256_add_epi32(isum[m][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    }
    __m256 wscale[2];
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h)
      wscale[h] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sp + b * kPanel + h * 8)));
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xs = _mm256_set1_ps(xscale[m * blocks + b]);
      #pragma GCC unroll 16
      for (int h = 0; h < 2; ++h)
        acc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m][h]), _mm256_mul_ps(wscale[h], xs), acc[m][h]);
    }
  }
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) store8(a, row0 + m, panel * kPanel + h * 8, acc[m][h]);
}

using TileFn = void (*)(const KernelArgs&, int row0, int panel);

template <int MaxMR>
void run(const KernelArgs& a, int pb, int pe, const TileFn* tiles) {
  for (int p = pb; p < pe; ++p)
    for (int row0 = 0; row0 < a.rows; row0 += MaxMR) tiles[std::min(MaxMR, a.rows - row0) - 1](a, row0, p);
}

void bf16_avx2(const KernelArgs& a, int pb, int pe) {
  static constexpr TileFn tiles[] = {bf16_tile<1>, bf16_tile<2>, bf16_tile<3>, bf16_tile<4>};
  run<4>(a, pb, pe, tiles);
}
void q8_avx2(const KernelArgs& a, int pb, int pe) {
  static constexpr TileFn tiles[] = {quant_tile<1, true>, quant_tile<2, true>};
  run<2>(a, pb, pe, tiles);
}
void q4_avx2(const KernelArgs& a, int pb, int pe) {
  static constexpr TileFn tiles[] = {quant_tile<1, false>, quant_tile<2, false>};
  run<2>(a, pb, pe, tiles);
}

}  // namespace

const KernelTable& avx2_kernels() {
  static const KernelTable table{bf16_avx2, q8_avx2, q4_avx2};
  return table;
}

}  // namespace inferlab::fast::detail

#pragma GCC pop_options
