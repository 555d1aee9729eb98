// Unpacking one 32-byte half (outputs 0-7 or 8-15) of a q4 / q5_0-style panel block into codes,
// shared by the AVX2 and the AVX-512 kernels. Include it inside the file's target region
// (INFERLAB_TARGET_BEGIN), so that each file compiles it for its own instruction set (with
// AVX-512VL, GCC fuses the 5-bit or/and into one vpternlog); internal linkage keeps the copies apart.
#pragma once
#include <immintrin.h>

#include <cstdint>

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

}  // namespace
}  // namespace inferlab::fast::detail
