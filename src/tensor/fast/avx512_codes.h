// AVX-512 pieces shared by kernels_avx512.cpp and kernels_amx.cpp: storing a tile row and unpacking
// q4 / q5_0 panel codes (a 32-byte half: nibble_codes.h, shared with the AVX2 kernels). Include it
// inside the file's target region (INFERLAB_TARGET_BEGIN), so that each file compiles it for its
// own instruction set; internal linkage keeps the copies apart.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "tensor/fast/kernels_internal.h"
#include "tensor/fast/nibble_codes.h"

namespace inferlab::fast::detail {
namespace {

// Outputs col..col+15 of `row` (fewer at the matrix's last panel): acc plus the bias.
inline void store_tile_row(const KernelArgs& a, int row, int col, __m512 acc) {
  const int n = std::min(16, a.w->out() - col);
  if (n <= 0) return;
  const __mmask16 mask = n == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
  const __m512 bias = a.bias ? _mm512_maskz_loadu_ps(mask, a.bias + col) : _mm512_setzero_ps();
  _mm512_mask_storeu_ps(a.y + static_cast<std::size_t>(row) * y_stride(a) + col, mask, _mm512_add_ps(acc, bias));
}

// The stored (offset) codes of line g of a q4 / q5_0 panel block, 16 outputs x 4 bytes each: the
// low nibbles are k-quad g (k 4g..4g+3), the high nibbles k-quad g + 4 (k 16 + 4g..); q5_0 (Fifth)
// adds bit 4 from the block's bit plane at byte 256: bit g for the low quad, bit g + 4 for the high.
template <bool Fifth>
inline void nibble_codes(const uint8_t* block, int g, __m512i& lo, __m512i& hi) {
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f);
  const __m512i raw = _mm512_load_si512(block + g * 64);
  lo = _mm512_and_si512(raw, low_nibbles);
  hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles);
  if constexpr (Fifth) {
    const __m512i fifth_bit = _mm512_set1_epi8(0x10), bits = _mm512_load_si512(block + 256);
    lo = _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(bits, 4 - g), fifth_bit, 0xf8);  // lo | (up & 0x10)
    hi = _mm512_ternarylogic_epi32(hi, g == 0 ? bits : _mm512_srli_epi16(bits, g), fifth_bit, 0xf8);
  }
}
}  // namespace
}  // namespace inferlab::fast::detail
