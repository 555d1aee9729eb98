// Unpacking one 32-byte half (outputs 0-7 or 8-15) of a q4 / q5_0 / mxfp4 panel block into codes,
// and mxfp4's scale bytes into fp32, shared by the AVX2 and the AVX-512 kernels. Include it inside
// the file's target region (INFERLAB_TARGET_BEGIN), so that each file compiles it for its own
// instruction set (with AVX-512VL, GCC fuses the 5-bit or/and into one vpternlog); internal linkage
// keeps the copies apart.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast::detail {
namespace {

// Line g of a block, 16 outputs x 4 bytes each, half `half_offset` (0 or 32 bytes): the low
// nibbles are k-quad g (k 4g..4g+3), the high nibbles k-quad g + 4 (k 16 + 4g..), codes 0..15;
// with Fifth (5-bit codes) bit 4 comes from the block's bit plane at byte 256: bit g for the low
// quad, bit g + 4 for the high (codes 0..31).
template <bool Fifth>
inline void nibble_codes_half(const uint8_t* block, int g, int half_offset, __m256i& lo, __m256i& hi) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0f);
  const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + g * 64 + half_offset));
  lo = _mm256_and_si256(raw, low_nibbles);
  hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles);
  if constexpr (Fifth) {
    const __m256i fifth_bit = _mm256_set1_epi8(0x10);
    const __m256i bits = _mm256_load_si256(reinterpret_cast<const __m256i*>(block + 256 + half_offset));
    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(bits, 4 - g), fifth_bit));
    hi = _mm256_or_si256(hi, _mm256_and_si256(g == 0 ? bits : _mm256_srli_epi16(bits, g), fifth_bit));
  }
}

// kMxfp4Codes in each 128-bit lane: vpshufb's table for a vector of e2m1 nibbles.
inline __m256i mxfp4_code_table() {
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Codes)));
}

// As nibble_codes_half<false>, for an mxfp4 block: each e2m1 nibble looked up in `table`
// (mxfp4_code_table: twice its value plus kMxfp4CodeOffset, 0..24).
inline void mxfp4_codes_half(const uint8_t* block, int g, int half_offset, __m256i table, __m256i& lo, __m256i& hi) {
  nibble_codes_half<false>(block, g, half_offset, lo, hi);
  lo = _mm256_shuffle_epi8(table, lo);
  hi = _mm256_shuffle_epi8(table, hi);
}

// 8 E8M0 scale bytes (8 outputs of a block) as 2^(e - 128) in fp32: e8m0_half_bits' bits, the
// exponent field e - 1 for e >= 2 and the subnormals 2^-128 << e below.
inline __m256 e8m0_halves(const uint8_t* bytes) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

}  // namespace
}  // namespace inferlab::fast::detail
