// AVX-512 kernels: vdpbf16ps for bf16 weights, vpdpbusd (VNNI) for int8 / 4-bit weights.
// Compiled for those extensions with a target pragma and only called after runtime detection.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "tensor/fast/kernels_internal.h"
#include "tensor/fast/isa_target.h"

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c")
// GCC 12 flags its own _mm512_undefined_* helpers inside the intrinsic headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "tensor/fast/avx512_codes.h"
#include "tensor/fast/stream_panel.h"

namespace inferlab::fast::detail {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Each weight panel is its own stream; the hardware prefetcher alone left decode at 60-75 % of the
// read bandwidth on a Zen 5 (bench kernels --rows 1). Every load prefetches InFlight / NV bytes
// ahead (kernels_internal.h): a single bf16 / f16 row 2.5 KiB in its 2-panel tiles (one-row hint),
// 2-4 rows 1.5 KiB in 4-panel tiles, decode batches 3 KiB in 2-panel tiles, a K-quant / q4_1 /
// q5_1 row 6 KiB in one panel (quant_tile<1, 1>). A single int8 / q4 / q5_0 row: on AMD 5 KiB in
// 2-panel tiles as bf16's, on Intel each block's lines 5 KiB ahead at its start (quant_row_tile).
// The one-row tiles take the prefetch hint of active_stream_prefetch() (cpu.h: nta on AMD, t0 on
// Intel), as two kernel tables; under t0 they also ask for each line kSingleRowFarBytes ahead into
// the L2 (prefetcht1).

inline __m256i load256(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 E8M0 scale bytes (a panel's outputs of one block) as 2^(e - 128) in fp32: e8m0_half_bits' bits,
// the exponent field e - 1 for e >= 2 and the subnormals 2^-128 << e below (as nibble_codes.h's
// e8m0_halves on 8).
inline __m512 e8m0_halves16(const uint8_t* bytes) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __mmask16 tiny = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(normal, tiny, _mm512_set1_epi32(0x00200000), e));
}

// Hint and InFlight: the prefetch's hint and the bytes a tile keeps in flight over its NV panels.
// Far (bytes, 0: none): each panel's lines also asked for that far ahead into the L2 (prefetcht1).
template <int MR, int NV, int Hint = _MM_HINT_T0, int InFlight = kBytesInFlight, int Far = 0>
void bf16_tile(const KernelArgs& a, int row0, int panel0) {
  const PackedMatrix& w = *a.w;
  const std::size_t ldx = w.in_padded();
  const uint16_t* x = a.in->bf16.data() + row0 * ldx;
  const int kpairs = w.in_padded() / 2;
  const uint8_t* wp[NV];
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) wp[v] = w.panel_data(panel0 + v);
  __m512 acc[MR][NV];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  auto step = [&](int kp, std::ptrdiff_t ahead, std::ptrdiff_t far) __attribute__((always_inline)) {
    __m512i wv[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) prefetch_line<Hint>(wp[v] + kp * 64 + ahead);
    if constexpr (Far > 0)
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) prefetch_line<_MM_HINT_T1>(wp[v] + kp * 64 + far);
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_load_si512(wp[v] + kp * 64);
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i xb = _mm512_set1_epi32(load_i32(x + m * ldx + 2 * kp));
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_dpbf16_ps(acc[m][v], (__m512bh)wv[v], (__m512bh)xb);
    }
  };
  stream_panel<NV, 64, InFlight / NV, Far>(kpairs, w.panel_bytes(), step);  // a line per k-pair
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) store_tile_row(a, row0 + m, (panel0 + v) * kPanel, acc[m][v]);
}

// f16 weights (per k, 16 rows of fp16) widened by vcvtph2ps and dotted with the fp32 activations
// as given, per row and output one FMA chain in k order (f16_panels.cpp's scalar kernel).
template <int MR, int NV, int Hint = _MM_HINT_T0, int InFlight = kBytesInFlight, int Far = 0>
void f16_tile(const KernelArgs& a, int row0, int panel0) {
  const PackedMatrix& w = *a.w;
  const int in = w.in();
  const float* x = a.x + static_cast<std::size_t>(row0) * in;
  const uint8_t* wp[NV];
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) wp[v] = w.panel_data(panel0 + v);
  __m512 acc[MR][NV];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  auto step = [&](int k, std::ptrdiff_t ahead, std::ptrdiff_t far) __attribute__((always_inline)) {
    __m512 wv[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if (k % 2 == 0) prefetch_line<Hint>(wp[v] + k * 32 + ahead);  // a line holds two k
      if (Far > 0 && k % 2 == 0) prefetch_line<_MM_HINT_T1>(wp[v] + k * 32 + far);
      wv[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wp[v] + k * 32)));
    }
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xb = _mm512_set1_ps(x[static_cast<std::size_t>(m) * in + k]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fmadd_ps(wv[v], xb, acc[m][v]);
    }
  };
  stream_panel<NV, 32, InFlight / NV, Far>(in, w.panel_bytes(), step);  // 32 bytes per k
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) store_tile_row(a, row0 + m, (panel0 + v) * kPanel, acc[m][v]);
}

// The quantized formats (F: int8, q4, q5_0, q4_1, q5_1, q4_k, q5_k, q6_k, mxfp4) against int8
// activations: exact int32 sums per block of 32 (q6_k: per half block, each with its own scale), then
// fp32 FMAs with the scales. The codes are unsigned (vpdpbusd's first operand): int8, q4 and q5_0
// keep an offset (q + 128, q + 8, q + 16) that the block's activation sum takes off, as mxfp4's
// e2m1 nibbles looked up (vpshufb) as twice their value + 12; q4_1 / q5_1 (d * q + m) and q4_k /
// q5_k ((d * sc) * q - dmin * m) add their min times that sum; q6_k's 0..63 mean q - 32.
// ByBlock: the tile holds every row of a decode batch (row0 0, MR rows) and reads the activations'
// *_by_block copies, whose strides are constants: with the rows' own strides (in_padded, blocks)
// the 8-row tiles ran out of general registers for the rows' pointers and spilled them (8 rows of
// q4 / int8 8-11 % faster this way on a Zen 5, bench kernels --rows 8).
// Far (one panel only): as bf16_tile's, for the one-row K-quant / q4_1 / q5_1 tiles. Hint and
// InFlight: as bf16_tile's (AMD's one-row int8 / q4 / q5_0 tiles: prefetchnta, 5 KiB over 2 panels).
template <int MR, int NV, WeightFormat F, bool ByBlock, int Far = 0, int Hint = _MM_HINT_T0, int InFlight = kBytesInFlight>
void quant_tile(const KernelArgs& a, int row0, int panel0) {
  static_assert(Far == 0 || NV == 1, "the far prefetch runs into the next panel, which only a one-panel tile reads next");
  constexpr bool Q8 = F == WeightFormat::Q8, K6 = F == WeightFormat::Q6K;
  constexpr bool fifth = five_bit_codes(F);  // 5-bit codes: nibble + a bit plane
  constexpr bool mins = F == WeightFormat::Q4K || F == WeightFormat::Q5K;  // q4_k, q5_k: (d * sc) * q - dmin * m
  const PackedMatrix& w = *a.w;
  const int blocks = w.blocks();
  // Row m of block b: q8 codes at x + m * x_row + b * x_block, scale / sums at [m * s_row + b * s_block].
  const std::size_t x_row = ByBlock ? kBlock : w.in_padded(), x_block = ByBlock ? MR * kBlock : kBlock;
  const std::size_t s_row = ByBlock ? 1 : blocks, s_block = ByBlock ? MR : 1;
  const PreparedInput& in = *a.in;
  const int8_t* x = ByBlock ? in.q8_by_block.data() : in.q8.data() + row0 * x_row;
  const float* xscale = ByBlock ? in.scale_by_block.data() : in.scale.data() + row0 * s_row;
  const int32_t* xsum = ByBlock ? in.sum_by_block.data() : in.sum.data() + row0 * s_row;
  const int32_t* xsum_low = !K6 ? nullptr : ByBlock ? in.sum_low_by_block.data() : in.sum_low.data() + row0 * s_row;
  constexpr int offset = dotted_code_offset(F);
  const uint8_t* wp[NV];
  const uint8_t* sp[NV];
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) wp[v] = w.panel_data(panel0 + v), sp[v] = w.panel_scale_bytes(panel0 + v);
  const __m512i low_nibbles = _mm512_set1_epi8(0x0f), high_bits = _mm512_set1_epi8(0x30);
  [[maybe_unused]] const __m512i mxfp4_table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Codes)));
  __m512 acc[MR][NV];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  constexpr int block_bytes = panel_block_bytes(F);  // per panel
  constexpr int scale_bytes = scale_block_bytes(F);  // per panel and block (the K-quants: on average)
  // The K-quants: a block's scales (16 bytes from `at`, u8 or int8) times the super-block's fp16 d
  // (exact in fp32).
  auto k_scales = [&](const uint8_t* at, const uint8_t* head) __attribute__((always_inline)) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    const __m512i wide = K6 ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(wide), _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(head))));
  };
  auto block = [&](int b, std::ptrdiff_t data_ahead, std::ptrdiff_t scale_ahead) __attribute__((always_inline)) {
    __m512i isum[MR][NV];
    const int8_t* xb = x + b * x_block;
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) prefetch_line<Hint>(sp[v] + b * scale_bytes + scale_ahead);
    // Each weight line asks for the line data_ahead further as it is loaded (as in bf16_tile).
    auto prefetch = [&](int v, int line) __attribute__((always_inline)) {
      prefetch_line<Hint>(wp[v] + b * block_bytes + line * 64 + data_ahead);
      if constexpr (Far > 0) prefetch_line<_MM_HINT_T1>(wp[v] + b * block_bytes + line * 64 + Far);
    };
    if constexpr (K6) {
      // Two halves of 16 k, each its own int32 sums and scale: codes from the q4 nibbles (low
      // nibble k-quad g, high nibble g + 4) and the high-bit vectors (h = g / 2; bits 0-1 / 4-5 for
      // k < 16, 2-3 / 6-7 above).
      __m512 ws[2][NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        const uint8_t* bs = sp[v] + kscale_offset(F, b);
        const uint8_t* head = sp[v] + kheader_offset(F, b);
        ws[0][v] = k_scales(bs, head);
        ws[1][v] = k_scales(bs + kPanel, head);
        #pragma GCC unroll 8
        for (int line = 0; line < 6; ++line) prefetch(v, line);
      }
      #pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const int32_t low = xsum_low[m * s_row + b * s_block], sum = half == 0 ? low : xsum[m * s_row + b * s_block] - low;
          const __m512i start = _mm512_set1_epi32(-32 * sum);
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) isum[m][v] = start;
        }
        #pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          __m512i code[NV];
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) {
            const __m512i raw = _mm512_load_si512(wp[v] + b * 384 + g * 64);
            const __m512i top = _mm512_load_si512(wp[v] + b * 384 + 256 + (g / 2) * 64);
            const int shift = (g % 2) * 4 + half * 2;  // of the 2 bits, to bits 4-5
            const __m512i nibble = half == 0 ? _mm512_and_si512(raw, low_nibbles)
                                             : _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_nibbles);
            const __m512i moved = shift == 4 ? top : shift < 4 ? _mm512_slli_epi16(top, 4 - shift) : _mm512_srli_epi16(top, shift - 4);
            code[v] = _mm512_ternarylogic_epi32(nibble, moved, high_bits, 0xf8);  // nibble | (moved & 0x30)
          }
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m) {
            const __m512i xv = _mm512_set1_epi32(load_i32(xb + m * x_row + half * 16 + g * 4));
            #pragma GCC unroll 16
            for (int v = 0; v < NV; ++v) isum[m][v] = _mm512_dpbusd_epi32(isum[m][v], code[v], xv);
          }
        }
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m512 xs = _mm512_set1_ps(xscale[m * s_row + b * s_block]);
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v)
            acc[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][v]), _mm512_mul_ps(ws[half][v], xs), acc[m][v]);
        }
      }
      return;
    }
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i start = _mm512_set1_epi32(-offset * xsum[m * s_row + b * s_block]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) isum[m][v] = start;
    }
    if constexpr (Q8) {
      #pragma GCC unroll 16
      for (int q = 0; q < 8; ++q) {
        __m512i wv[NV];
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) prefetch(v, q);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) wv[v] = _mm512_load_si512(wp[v] + b * 512 + q * 64);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m512i xv = _mm512_set1_epi32(load_i32(xb + m * x_row + q * 4));
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) isum[m][v] = _mm512_dpbusd_epi32(isum[m][v], wv[v], xv);
        }
      }
    } else {
      #pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) {
        __m512i lo[NV], hi[NV];
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) prefetch(v, g);
        if (fifth && g == 0)
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) prefetch(v, 4);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) nibble_codes<fifth>(wp[v] + b * block_bytes, g, lo[v], hi[v]);
        if constexpr (F == WeightFormat::MXFP4)  // e2m1 nibbles -> twice their value + 12
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) lo[v] = _mm512_shuffle_epi8(mxfp4_table, lo[v]), hi[v] = _mm512_shuffle_epi8(mxfp4_table, hi[v]);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m512i xlo = _mm512_set1_epi32(load_i32(xb + m * x_row + g * 4));
          const __m512i xhi = _mm512_set1_epi32(load_i32(xb + m * x_row + (g + 4) * 4));
          #pragma GCC unroll 16
          for (int v = 0; v < NV; ++v) {
            isum[m][v] = _mm512_dpbusd_epi32(isum[m][v], lo[v], xlo);
            isum[m][v] = _mm512_dpbusd_epi32(isum[m][v], hi[v], xhi);
          }
        }
      }
    }
    if constexpr (block_mins(F) || mins) {
      // A scale and a min per output and block: q4_1 / q5_1's fp16 d and m (d * q + m), the
      // K-quants' (float(sc) * d) and (float(m) * dmin) ((d * sc) * q - dmin * m).
      __m512 ws[NV], wm[NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        if constexpr (block_mins(F)) {
          ws[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sp[v] + b * scale_bytes)));
          wm[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sp[v] + b * scale_bytes + 32)));
        } else {
          const uint8_t* bs = sp[v] + kscale_offset(F, b);
          const uint8_t* head = sp[v] + kheader_offset(F, b);
          ws[v] = k_scales(bs, head);
          wm[v] = k_scales(bs + kPanel, head + 32);
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) {
        const float s = xscale[m * s_row + b * s_block];
        const __m512 xs = _mm512_set1_ps(s), xm = _mm512_set1_ps(s * static_cast<float>(xsum[m * s_row + b * s_block]));
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          acc[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][v]), _mm512_mul_ps(ws[v], xs), acc[m][v]);
          acc[m][v] = block_mins(F) ? _mm512_fmadd_ps(wm[v], xm, acc[m][v]) : _mm512_fnmadd_ps(wm[v], xm, acc[m][v]);
        }
      }
      return;
    }
    __m512 wscale[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if constexpr (F == WeightFormat::MXFP4)
        wscale[v] = e8m0_halves16(sp[v] + b * scale_bytes);
      else
        wscale[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sp[v] + b * scale_bytes)));
    }
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512 xs = _mm512_set1_ps(xscale[m * s_row + b * s_block]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v)
        acc[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][v]), _mm512_mul_ps(wscale[v], xs), acc[m][v]);
    }
  };
  // The block's weight lines kPrefetchBytes ahead and its scales at least 8 blocks ahead, and
  // never fewer blocks ahead than the weights; near the panel's end, the start of the panel NV
  // further on, which this thread's next tile streams (as in bf16_tile). The two streams move on
  // at their own distance from the panel's end: when the scales moved on with the weights (2-4
  // blocks from the end instead of 8), the first 4-6 blocks of every tile's scales were never
  // fetched early (q4 +2-6 % at 1 row, int8 within noise, on a Zen 5).
  constexpr int data_ahead = InFlight / NV;
  constexpr int kScaleAheadBlocks = std::max(8, (data_ahead + block_bytes - 1) / block_bytes);
  const std::ptrdiff_t skip = NV - 1;
  const std::ptrdiff_t data_near = data_ahead, data_next = data_near + skip * static_cast<std::ptrdiff_t>(w.panel_bytes());
  const std::ptrdiff_t scale_near = kScaleAheadBlocks * scale_bytes,
                       scale_next = scale_near + skip * static_cast<std::ptrdiff_t>(w.scale_panel_bytes());
  const int data_tail = std::max(0, blocks - data_ahead / block_bytes);
  const int scale_tail = std::max(0, blocks - kScaleAheadBlocks);  // <= data_tail
  for (int b = 0; b < scale_tail; ++b) block(b, data_near, scale_near);
  for (int b = scale_tail; b < data_tail; ++b) block(b, data_near, scale_next);
  for (int b = data_tail; b < blocks; ++b) block(b, data_next, scale_next);
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) store_tile_row(a, row0 + m, (panel0 + v) * kPanel, acc[m][v]);
}

// How far a one-row tile also asks for its lines into the L2: only under prefetcht0 (Intel).
template <int Hint>
constexpr int kRowFar = Hint == _MM_HINT_T0 ? kSingleRowFarBytes : 0;

// One decode row of int8 / q4 / q5_0 / mxfp4 (whose codes carry an offset and one scale per block): each
// panel's 16 outputs as two 256-bit halves (rows 0-7 and 8-15, each its own vpdpbusd chain), one
// panel at a time, each block asking at its start for its lines kSingleRowBytesInFlight ahead with
// Hint; under prefetcht0 (Intel) also kSingleRowFarBytes ahead into the L2 and its scales
// kSingleRowScaleBytes ahead (docs/speed.md). (Under nta-panels, Zen 5, quant_tile's two-panel
// tiles run instead: quant_avx512.) It adds the same exact int32 sums per block and makes the same
// fp32 FMAs in block order: the bits of every other tile.
template <WeightFormat F, int Hint>
void quant_row_tile(const KernelArgs& a, int panel) {
  static_assert(F == WeightFormat::Q8 || F == WeightFormat::Q4 || F == WeightFormat::Q5 || F == WeightFormat::MXFP4);
  constexpr bool Q8 = F == WeightFormat::Q8, fifth = F == WeightFormat::Q5, mxfp4 = F == WeightFormat::MXFP4;
  constexpr int offset = dotted_code_offset(F);
  constexpr int block_bytes = panel_block_bytes(F), scale_bytes = scale_block_bytes(F);
  [[maybe_unused]] const __m256i mxfp4_table = mxfp4_code_table();
  const PackedMatrix& w = *a.w;
  const int blocks = w.blocks();
  const int8_t* x = a.in->q8.data();
  const float* xscale = a.in->scale.data();
  const int32_t* xsum = a.in->sum.data();
  const uint8_t* wp = w.panel_data(panel);
  const uint8_t* sp = w.panel_scale_bytes(panel);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int b = 0; b < blocks; ++b) {
    const uint8_t* wb = wp + static_cast<std::size_t>(b) * block_bytes;
    prefetch_block<Hint, kSingleRowBytesInFlight, kRowFar<Hint>, block_bytes, scale_bytes>(wb, sp, b);
    const int8_t* xb = x + b * kBlock;
    __m256i isum[2];
    isum[0] = isum[1] = _mm256_set1_epi32(-offset * xsum[b]);
    if constexpr (Q8) {
      #pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        const __m256i xv = _mm256_set1_epi32(load_i32(xb + q * 4));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) isum[h] = _mm256_dpbusd_epi32(isum[h], load256(wb + q * 64 + h * 32), xv);
      }
    } else {
      #pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m256i xlo = _mm256_set1_epi32(load_i32(xb + g * 4)), xhi = _mm256_set1_epi32(load_i32(xb + (g + 4) * 4));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          __m256i lo, hi;
          if constexpr (mxfp4)
            mxfp4_codes_half(wb, g, h * 32, mxfp4_table, lo, hi);
          else
            nibble_codes_half<fifth>(wb, g, h * 32, lo, hi);
          isum[h] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(isum[h], lo, xlo), hi, xhi);
        }
      }
    }
    const __m256 xs = _mm256_set1_ps(xscale[b]);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 ws = mxfp4 ? e8m0_halves(sp + b * scale_bytes + h * 8)
                              : _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sp + b * scale_bytes + h * 16)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(ws, xs), acc[h]);
    }
  }
  store_tile_row(a, 0, panel * kPanel, _mm512_insertf32x8(_mm512_castps256_ps512(acc[0]), acc[1], 1));
}

using TileFn = void (*)(const KernelArgs&, int row0, int panel0);

template <template <int, int> class Kernel, int NV, int... M>
constexpr std::array<TileFn, sizeof...(M)> row_table(std::integer_sequence<int, M...>) {
  return {Kernel<M + 1, NV>::fn...};
}

// Few rows (2 up to SmallRows; one row takes run_single_row): 4 panels (64 outputs) at once. A decode
// batch (up to BatchRows): every row in one tile of BatchNV panels, so the weights stream from
// memory once while all rows use them. Many rows (prefill): BigNV panels x up to BigMR rows of
// accumulators, the panels staying in L2 across row blocks. Tables are indexed [mr - 1]; the last
// panels of a range take narrower tiles.
template <template <int, int> class Kernel, int SmallRows, int BatchRows, int BatchNV, int BigMR, int BigNV>
void run_panels(const KernelArgs& a, int panel_begin, int panel_end) {
  static constexpr auto four = row_table<Kernel, 4>(std::make_integer_sequence<int, 8>{});
  static constexpr auto two = row_table<Kernel, 2>(std::make_integer_sequence<int, 8>{});
  static constexpr auto one = row_table<Kernel, 1>(std::make_integer_sequence<int, 8>{});
  auto tile = [&](int row0, int mr, int panel0, int nv) {
    (nv == 4 ? four : nv == 2 ? two : one)[mr - 1](a, row0, panel0);
  };
  const bool small = a.rows <= SmallRows, batch = !small && a.rows <= BatchRows;
  const int widest = small ? 4 : batch ? BatchNV : BigNV, mr = small || batch ? a.rows : BigMR;
  for (int p = panel_begin; p < panel_end;) {
    const int left = panel_end - p;
    const int nv = left >= 4 && widest >= 4 ? 4 : left >= 2 && widest >= 2 ? 2 : 1;
    for (int row0 = 0; row0 < a.rows; row0 += mr) tile(row0, std::min(mr, a.rows - row0), p, nv);
    p += nv;
  }
}

// One row (kSingleRowBytesInFlight): tiles of 2 panels, a 1-panel tile for an odd last panel.
template <TileFn Two, TileFn One>
void run_single_row(const KernelArgs& a, int panel_begin, int panel_end) {
  int p = panel_begin;
  for (; p + 2 <= panel_end; p += 2) Two(a, 0, p);
  if (p < panel_end) One(a, 0, p);
}
constexpr int kRowFlight = kSingleRowBytesInFlight;

// Instantiated only for the tiles run_panels uses, whose accumulators fit the 32 vector registers
// with room for the weights and the broadcast input, or (integer decode batches) nearly so
// (others are never called: nullptr).
template <int MR, int NV>
struct Bf16Kernel {
  static constexpr bool fits = MR * NV <= 24;
  static constexpr TileFn fn = fits ? bf16_tile<(fits ? MR : 1), NV> : nullptr;
};
template <int MR, int NV>
struct F16Kernel {
  static constexpr bool fits = MR * NV <= 24;
  static constexpr TileFn fn = fits ? f16_tile<(fits ? MR : 1), NV> : nullptr;
};
// Integer tiles (up to 16 accumulators), as quant_avx512 runs them: 2 rows x 4 panels, a decode
// batch of up to kBatchRows rows x 2 panels (both ByBlock: one tile of every row), prefill tiles of
// up to kBigQuantRows rows x 2 panels.
constexpr int kSmallQuantRows = 2, kBatchRows = 8, kBigQuantRows = 4;
template <WeightFormat F, bool ByBlock>
struct QuantKernel {
  template <int MR, int NV>
  struct Of {
    static constexpr bool used = ByBlock ? MR >= 2 && (NV <= 2 || MR <= kSmallQuantRows) : MR <= kBigQuantRows && NV <= 2;
    static constexpr bool fits = used && MR * NV <= 16;
    static constexpr TileFn fn = fits ? quant_tile<(fits ? MR : 2), NV, F, ByBlock> : nullptr;
  };
};

// bf16 prefill: 6 rows x 4 panels = 24 accumulators, 4 weight loads and 6 broadcasts per 24
// vdpbf16ps (8 x 2 needed 10 loads per 16).
template <int RowHint>
void bf16_avx512(const KernelArgs& a, int pb, int pe) {
  if (a.rows == 1) return run_single_row<bf16_tile<1, 2, RowHint, kRowFlight, kRowFar<RowHint>>, bf16_tile<1, 1, RowHint, kRowFlight, kRowFar<RowHint>>>(a, pb, pe);
  run_panels<Bf16Kernel, 4, 4, 4, 6, 4>(a, pb, pe);
}
// f16: the bf16 shapes (fp32 FMAs, up to 24 accumulators).
template <int RowHint>
void f16_avx512(const KernelArgs& a, int pb, int pe) {
  if (a.rows == 1) return run_single_row<f16_tile<1, 2, RowHint, kRowFlight, kRowFar<RowHint>>, f16_tile<1, 1, RowHint, kRowFlight, kRowFar<RowHint>>>(a, pb, pe);
  run_panels<F16Kernel, 4, 4, 4, 6, 4>(a, pb, pe);
}
// Integer tiles hold two accumulator sets (int32 per block, fp32 overall). Prefill: 4 rows x 2
// panels, all in registers. A decode batch: up to 8 rows x 2 panels, whose 16 fp32 totals the
// compiler keeps in L1 (touched once per block): reading the weights once beat the register-only
// 4 x 2 tiles by 10-15 % at 8 rows on the Zen 5 (bench kernels --rows 8), and lost 12 % in prefill.
// 2 to 8 rows read the activations' *_by_block copies (quant_tile's ByBlock).
// One row of int8 / q4 / q5_0 / mxfp4: quant_row_tile's one panel in two 256-bit halves, with the row
// hint; under nta-panels (Zen 5) two 512-bit panels per tile with 5 KiB in flight, prefetchnta, as
// at 6b6815f. Measured in separate processes (bench/ab_binaries.sh, 6 interleaved rounds, issue
// 46): on a Zen 5 the halves decoded Q8_0 / Q4_0 at 0.73-0.80x of the two panels at 1 thread and
// 0.83x at 2; on a Zen 4 the two panels decoded at 0.71x / 0.62x of the halves under prefetchnta
// (docs/speed.md). On Intel (t0) the halves' t0 + t1 prefetch was tuned on a Xeon. The K-quants and
// q4_1 / q5_1 (more scale bytes and epilogue per block) one panel per 512-bit tile, 6 KiB ahead
// with prefetcht0, which read faster than two-panel non-temporal tiles (Zen 5: a 1,024-wide Q4_K_M
// tg64 119-126 -> 129-138 t/s at 1 thread, 213 -> 233-246 at 2; docs/speed.md).
template <WeightFormat F, int RowHint, bool RowPanels>
void quant_avx512(const KernelArgs& a, int pb, int pe) {
  constexpr bool offset_codes = F == WeightFormat::Q8 || F == WeightFormat::Q4 || F == WeightFormat::Q5 || F == WeightFormat::MXFP4;
  if (a.rows == 1) {
    if constexpr (offset_codes && RowPanels)
      return run_single_row<quant_tile<1, 2, F, false, 0, RowHint, kRowFlight>, quant_tile<1, 1, F, false, 0, RowHint, kRowFlight>>(a, pb, pe);
    for (int p = pb; p < pe; ++p) {
      if constexpr (offset_codes)
        quant_row_tile<F, RowHint>(a, p);
      else
        quant_tile<1, 1, F, false, kRowFar<RowHint>>(a, 0, p);
    }
    return;
  }
  constexpr int small = kSmallQuantRows, batch = kBatchRows, big = kBigQuantRows;
  if (a.rows <= batch) return run_panels<QuantKernel<F, true>::template Of, small, batch, 2, big, 2>(a, pb, pe);
  run_panels<QuantKernel<F, false>::template Of, small, batch, 2, big, 2>(a, pb, pe);
}

// f32_to_bf16 on 16 lanes: round to nearest even, NaN kept quiet (not vcvtneps2bf16, which
// flushes denormals and so would differ from the scalar rounding).
inline __m256i round_to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

void bf16_row_avx512(const float* src, int in, int in_padded, uint16_t* dst) {
  int k = 0;
  for (; k + 16 <= in; k += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), round_to_bf16(_mm512_loadu_ps(src + k)));
  if (k < in) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (in - k)) - 1);
    _mm256_mask_storeu_epi16(dst + k, mask, round_to_bf16(_mm512_maskz_loadu_ps(mask, src + k)));
  }
  for (k = in; k < in_padded; ++k) dst[k] = 0;
}

// Per block of 32: d = max|x| / 127, q = nearbyint(x / d) clamped to [-127, 127] (the default
// rounding mode is nearest even, as vcvtps2dq's), sum of q. Lanes past `in` are zero.
void q8_row_avx512(const float* src, int in, int blocks, int8_t* dst, float* scale, int32_t* sum) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int b = 0; b < blocks; ++b) {
    const int k0 = b * kBlock, left = std::clamp(in - k0, 0, kBlock);
    const __mmask16 m0 = static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
    const __mmask16 m1 = static_cast<__mmask16>(left >= 32 ? 0xffff : left > 16 ? (1u << (left - 16)) - 1 : 0);
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, src + k0), x1 = _mm512_maskz_loadu_ps(m1, src + k0 + 16);
    // max(|x|, 0) puts 0 in NaN lanes: NaN never becomes the block maximum, as with std::max.
    const __m512 zero = _mm512_setzero_ps();
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(_mm512_and_ps(x0, abs_mask), zero), _mm512_max_ps(_mm512_and_ps(x1, abs_mask), zero)));
    const float d = amax / 127.0f;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    const __m512 vinv = _mm512_set1_ps(inv);
    // Clamped as floats: 1/d is inf for a block of denormals, and x * inf must give 127 as in the
    // scalar code (vcvtps2dq gives INT_MIN). max_ps returns its second operand for NaN: -127.
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    // Lanes past `in` are 0 (not 0 * inv, which is NaN when inv is inf).
    const __m512i q0 = _mm512_maskz_cvtps_epi32(m0, _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x0, vinv), lo), hi));
    const __m512i q1 = _mm512_maskz_cvtps_epi32(m1, _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x1, vinv), lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k0), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k0 + 16), _mm512_cvtepi32_epi8(q1));
    scale[b] = d;
    sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

// The blocks format's 16 lanes in one zmm per (activation row, weight row): an fma per element.
template <int XR, int WR>
void dot16_tile_avx512(const float* w, std::size_t w_stride, const float* x, std::size_t x_stride, int n, float* acc) {
  __m512 sum[XR][WR];
  #pragma GCC unroll 4
  for (int a = 0; a < XR; ++a)
    #pragma GCC unroll 4
    for (int i = 0; i < WR; ++i) sum[a][i] = _mm512_setzero_ps();
  for (int k = 0; k < n; k += 16) {
    __m512 wv[WR];
    #pragma GCC unroll 4
    for (int i = 0; i < WR; ++i) wv[i] = _mm512_loadu_ps(w + i * w_stride + k);
    #pragma GCC unroll 4
    for (int a = 0; a < XR; ++a) {
      const __m512 xv = _mm512_loadu_ps(x + a * x_stride + k);
      #pragma GCC unroll 4
      for (int i = 0; i < WR; ++i) sum[a][i] = _mm512_fmadd_ps(wv[i], xv, sum[a][i]);
    }
  }
  #pragma GCC unroll 4
  for (int a = 0; a < XR; ++a)
    #pragma GCC unroll 4
    for (int i = 0; i < WR; ++i) _mm512_storeu_ps(acc + (a * 4 + i) * 16, sum[a][i]);
}
// The tiles of XR activation rows, indexed by weight rows - 1.
using TileRow = std::array<void (*)(const float*, std::size_t, const float*, std::size_t, int, float*), 4>;
template <int XR>
constexpr TileRow tile_row{dot16_tile_avx512<XR, 1>, dot16_tile_avx512<XR, 2>, dot16_tile_avx512<XR, 3>, dot16_tile_avx512<XR, 4>};
void dot16_avx512(const float* w, std::size_t w_stride, int w_rows, const float* x, std::size_t x_stride, int x_rows, int n,
                  float* acc) {
  static constexpr std::array<TileRow, 4> table{tile_row<1>, tile_row<2>, tile_row<3>, tile_row<4>};
  table[x_rows - 1][w_rows - 1](w, w_stride, x, x_stride, n, acc);
}

// The kernels whose one-row tiles prefetch with RowHint (RowPanels: int8 / q4 / q5_0's one row in
// two-panel tiles); only those tiles differ between the tables.
template <int RowHint, bool RowPanels>
constexpr KernelTable avx512_table{bf16_avx512<RowHint>,
                                   f16_avx512<RowHint>,
                                   quant_avx512<WeightFormat::Q8, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q4, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q5, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q4_1, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q5_1, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q4K, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q5K, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::Q6K, RowHint, RowPanels>,
                                   quant_avx512<WeightFormat::MXFP4, RowHint, RowPanels>,
                                   bf16_row_avx512,
                                   q8_row_avx512,
                                   false,
                                   dot16_avx512,
                                   kBatchRows};

}  // namespace

const KernelTable& avx512_kernels(StreamPrefetch hint) {
  switch (hint) {
    case StreamPrefetch::Nta: return avx512_table<_MM_HINT_NTA, false>;
    case StreamPrefetch::NtaPanels: return avx512_table<_MM_HINT_NTA, true>;
    case StreamPrefetch::T0: break;
  }
  return avx512_table<_MM_HINT_T0, false>;
}
const KernelTable& avx512_kernels() { return avx512_kernels(active_stream_prefetch()); }

}  // namespace inferlab::fast::detail

INFERLAB_TARGET_END
