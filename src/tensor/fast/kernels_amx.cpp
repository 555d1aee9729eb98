// AMX kernels (Intel Sapphire Rapids and later): prefill of int8 / q4 / q5_0 weights in tile
// multiplies (tdpbssd), every other case the AVX-512 kernels'. Compiled for AMX-TILE / AMX-INT8 and
// AVX-512 with a target region and only called after runtime detection (cpu.cpp, which also asks
// Linux for the tile state).
//
// A panel's block of 32 inputs is already an AMX B tile: 8 rows (the k-quads) of 16 outputs x 4
// bytes (kernels_internal.h's q8_offset). Each panel is converted once per call into signed codes
// (int8: stored ^ 0x80; q4 / q5_0: the nibbles (and fifth bits) minus the offset), then for every
// 16 activation rows one tdpbssd per block gives the block's exact int32 sums (16 rows x 16
// outputs), which the AVX-512 epilogue scales into fp32 in block order: acc = fma(float(isum),
// ws * xs, acc), the arithmetic of every other tile, so the bits do not depend on the path.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensor/fast/kernels_internal.h"
#include "tensor/fast/isa_target.h"

INFERLAB_TARGET_BEGIN("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "tensor/fast/avx512_codes.h"

namespace inferlab::fast::detail {

namespace {

constexpr int kTileRows = 16;  // activation rows per A tile (and C tile)
// Fewer rows keep the AVX-512 tiles: each block's int32 sums go through memory to be scaled
// (20 ns per 16 x 16 x 32 multiply on an Emerald Rapids core, where the tile unit alone takes 5),
// which 16-32 rows do not repay (gate_up, 1 thread: 16 rows 0.8-0.9x, 32 rows 0.9-1.1x, 64 rows
// 1.15x, 128 rows 1.3-1.6x of AVX-512; docs/speed.md).
constexpr int kAmxMinRows = 64;
constexpr std::size_t kGroupBytes = 512 * 1024;  // activation bytes per group of rows (L2: 2 MiB)

// The tiles: tmm0 / tmm1 C (16 x 16 int32), tmm2 / tmm3 A (16 rows x 32 int8 of one block), tmm4 /
// tmm5 B (8 k-quads x 64 bytes), two of each so that one block's multiply runs while the other's
// sums are scaled.
AmxTileConfig block_tiles() {
  AmxTileConfig c;
  for (int t : {0, 1}) c.tile(t, kTileRows, 64);
  for (int t : {2, 3}) c.tile(t, kTileRows, kBlock);
  for (int t : {4, 5}) c.tile(t, kBlock / 4, 64);
  return c;
}

// A panel's codes as signed int8 B tiles, [blocks][8][64].
template <WeightFormat F>
void signed_panel(const uint8_t* panel, int blocks, int8_t* out) {
  constexpr int block_bytes = panel_block_bytes(F);
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(stored_code_offset(F)));
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* src = panel + static_cast<std::size_t>(b) * block_bytes;
    int8_t* dst = out + static_cast<std::size_t>(b) * 512;
    if constexpr (F == WeightFormat::Q8) {
      for (int q = 0; q < 8; ++q)
        _mm512_store_si512(dst + q * 64, _mm512_xor_si512(_mm512_load_si512(src + q * 64), _mm512_set1_epi8(static_cast<char>(0x80))));
    } else {
      // Line g: k-quads g and g + 4 (avx512_codes.h).
      for (int g = 0; g < 4; ++g) {
        __m512i lo, hi;
        nibble_codes<F == WeightFormat::Q5>(src, g, lo, hi);
        _mm512_store_si512(dst + g * 64, _mm512_sub_epi8(lo, offset));
        _mm512_store_si512(dst + (g + 4) * 64, _mm512_sub_epi8(hi, offset));
      }
    }
  }
}

// acc[m] += float(sums[m]) * (ws * xs[m]) for the tile's rows (a partial tile's padding rows too:
// their scales are read from the copy's own zeros, and their results never stored).
inline void scale_block(const int32_t* sums, __m512 ws, const float* xscale, std::size_t s_row, __m512* acc) {
  #pragma GCC unroll 16
  for (int m = 0; m < kTileRows; ++m) {
    const __m512 xs = _mm512_set1_ps(xscale[m * s_row]);
    acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + m * 16)), _mm512_mul_ps(ws, xs), acc[m]);
  }
}

template <WeightFormat F>
void quant_amx(const KernelArgs& a, int panel_begin, int panel_end) {
  if (a.rows < kAmxMinRows) return panel_kernel(avx512_kernels(), F)(a, panel_begin, panel_end);
  const PackedMatrix& w = *a.w;
  const PreparedInput& in = *a.in;
  const int blocks = w.blocks();
  const std::size_t ldx = w.in_padded();
  constexpr int scale_bytes = scale_block_bytes(F);
  thread_local AlignedBuffer codes, tail_rows;
  thread_local std::vector<float> tail_scales;
  if (codes.size() < static_cast<std::size_t>(blocks) * 512) codes = AlignedBuffer(static_cast<std::size_t>(blocks) * 512);
  // The last, partial, tile of rows reads its activations from a copy padded to 16 rows with zeros.
  const int full_rows = a.rows / kTileRows * kTileRows, tail = a.rows - full_rows;
  if (tail) {
    const std::size_t bytes = kTileRows * ldx;
    if (tail_rows.size() < bytes) tail_rows = AlignedBuffer(bytes);
    std::memcpy(tail_rows.data(), in.q8.data() + full_rows * ldx, tail * ldx);
    std::memset(tail_rows.data() + tail * ldx, 0, (kTileRows - tail) * ldx);
    tail_scales.assign(static_cast<std::size_t>(kTileRows) * blocks, 0.0f);
    std::copy_n(in.scale.data() + static_cast<std::size_t>(full_rows) * blocks, static_cast<std::size_t>(tail) * blocks, tail_scales.data());
  }
  static const AmxTileConfig config = block_tiles();
  _tile_loadconfig(&config);
  alignas(64) int32_t sums[2][kTileRows * 16];
  int8_t* b_tiles = reinterpret_cast<int8_t*>(codes.data());
  // Rows in groups whose activations stay in the L2 while every panel passes over them (each panel
  // converted again per group): one pass of 512 rows over down's 4,864 inputs read 2.5 MB per panel.
  const int group_rows = std::max(kTileRows, static_cast<int>(kGroupBytes / ldx) / kTileRows * kTileRows);
  for (int group = 0; group < a.rows; group += group_rows)
  for (int p = panel_begin; p < panel_end; ++p) {
    signed_panel<F>(w.panel_data(p), blocks, b_tiles);
    const uint8_t* sp = w.panel_scale_bytes(p);
    auto wscale = [&](int b) { return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sp + b * scale_bytes))); };
    for (int row0 = group; row0 < std::min(a.rows, group + group_rows); row0 += kTileRows) {
      const int mr = std::min(kTileRows, a.rows - row0);
      const int8_t* x = row0 < full_rows ? in.q8.data() + row0 * ldx : reinterpret_cast<const int8_t*>(tail_rows.data());
      const float* xscale = row0 < full_rows ? in.scale.data() + static_cast<std::size_t>(row0) * blocks : tail_scales.data();
      __m512 acc[kTileRows];
      #pragma GCC unroll 16
      for (int m = 0; m < kTileRows; ++m) acc[m] = _mm512_setzero_ps();
      // Blocks in pairs: the second block's multiply is issued before the first one's sums are
      // scaled, so the tile unit and the vector units overlap.
      int b = 0;
      for (; b + 2 <= blocks; b += 2) {
        _tile_loadd(2, x + b * kBlock, ldx);
        _tile_loadd(4, b_tiles + b * 512, 64);
        _tile_zero(0);
        _tile_dpbssd(0, 2, 4);
        _tile_loadd(3, x + (b + 1) * kBlock, ldx);
        _tile_loadd(5, b_tiles + (b + 1) * 512, 64);
        _tile_zero(1);
        _tile_dpbssd(1, 3, 5);
        _tile_stored(0, sums[0], 64);
        scale_block(sums[0], wscale(b), xscale + b, blocks, acc);
        _tile_stored(1, sums[1], 64);
        scale_block(sums[1], wscale(b + 1), xscale + b + 1, blocks, acc);
      }
      if (b < blocks) {
        _tile_loadd(2, x + b * kBlock, ldx);
        _tile_loadd(4, b_tiles + b * 512, 64);
        _tile_zero(0);
        _tile_dpbssd(0, 2, 4);
        _tile_stored(0, sums[0], 64);
        scale_block(sums[0], wscale(b), xscale + b, blocks, acc);
      }
      // Unrolled with constant indices, so that acc stays in registers.
      #pragma GCC unroll 16
      for (int m = 0; m < kTileRows; ++m)
        if (m < mr) store_tile_row(a, row0 + m, p * kPanel, acc[m]);
    }
  }
  _tile_release();
}

}  // namespace

const KernelTable& amx_kernels() {
  auto with_amx = [](KernelTable table) {
    table.q8 = quant_amx<WeightFormat::Q8>;
    table.q4 = quant_amx<WeightFormat::Q4>;
    table.q5 = quant_amx<WeightFormat::Q5>;
    return table;
  };
  // The other kernels (and quant_amx's few rows) are AVX-512's of the active prefetch hint.
  static const KernelTable t0 = with_amx(avx512_kernels(StreamPrefetch::T0)), nta = with_amx(avx512_kernels(StreamPrefetch::Nta)),
                           nta_panels = with_amx(avx512_kernels(StreamPrefetch::NtaPanels));
  switch (active_stream_prefetch()) {
    case StreamPrefetch::Nta: return nta;
    case StreamPrefetch::NtaPanels: return nta_panels;
    case StreamPrefetch::T0: break;
  }
  return t0;
}

}  // namespace inferlab::fast::detail

INFERLAB_TARGET_END
