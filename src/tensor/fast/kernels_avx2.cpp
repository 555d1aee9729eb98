// AVX2 + FMA kernels: the same arithmetic as the AVX-512 ones (bf16 pairs as two fp32 FMAs, int8
// dot products via maddubs), for CPUs without AVX-512 BF16 / VNNI.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "tensor/fast/kernels_internal.h"
#include "tensor/fast/simd_math.h"
#include "tensor/fast/isa_target.h"

INFERLAB_TARGET_BEGIN("avx2,fma,f16c")
#include "tensor/fast/nibble_codes.h"
#include "tensor/fast/stream_panel.h"

namespace inferlab::fast::detail {
namespace {

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline void store8(const KernelArgs& a, int row, int col, __m256 acc) {
  const int n = std::min(8, a.w->out() - col);
  if (n <= 0) return;
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, acc);
  float* dst = a.y + static_cast<std::size_t>(row) * y_stride(a) + col;
  for (int i = 0; i < n; ++i) dst[i] = tmp[i] + (a.bias ? a.bias[col + i] : 0.0f);
}

// MR rows' totals of one panel (two halves of 8 outputs) into y.
template <int MR>
inline void store_panel_rows(const KernelArgs& a, int row0, int panel, const __m256 (&acc)[MR][2]) {
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) store8(a, row0 + m, panel * kPanel + h * 8, acc[m][h]);
}

// Decode reads each weight once, straight from DRAM; on CPUs such as Zen 1 the hardware
// prefetcher alone left the int8 kernel at ~60 % of the read bandwidth (compute and memory
// waits did not overlap): every load prefetches kPrefetchBytes<NV> ahead (kernels_internal.h).

inline void prefetch(const uint8_t* p) { prefetch_line<_MM_HINT_T0>(p); }
// One decode row under the t0 hint (Far > 0, avx2_kernels(StreamPrefetch::T0)): each line also
// asked for Far bytes ahead into the L2, as AVX-512's one-row tiles do on Intel (cpu.h).
inline void prefetch_far(const uint8_t* p) { prefetch_line<_MM_HINT_T1>(p); }

// A vector of bf16 pairs as fp32: the odd element of a pair is the high half of each 32-bit lane,
// the even one the low half shifted up.
inline void bf16_pairs(__m256i raw, __m256& odd, __m256& even) {
  odd = _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
}

// bf16 weights as fp32 (bf16_pairs). Activations come widened already (PreparedInput::bf16_f32), so a
// row costs two broadcasts per k-pair and no conversion. Per row and output the order of the
// FMAs (odd then even, k ascending) is that of the scalar kernel, in every tile shape below.
// Far: see prefetch_far (0: none).
template <int MR, int NV, int Far = 0>
void bf16_decode_tile(const KernelArgs& a, int row0, int panel0) {
  const PackedMatrix& w = *a.w;
  const std::size_t ldx = w.in_padded();
  const float* x = a.in->bf16_f32.data() + row0 * ldx;
  const uint8_t* wp[NV];
  #pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) wp[v] = w.panel_data(panel0 + v);
  __m256 acc[MR][NV][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[m][v][0] = acc[m][v][1] = _mm256_setzero_ps();
  auto step = [&](int kp, std::ptrdiff_t ahead, std::ptrdiff_t far) __attribute__((always_inline)) {
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      prefetch(wp[v] + kp * 64 + ahead);
      if constexpr (Far > 0) prefetch_far(wp[v] + kp * 64 + far);
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256 odd, even;
        bf16_pairs(_mm256_load_si256(reinterpret_cast<const __m256i*>(wp[v] + kp * 64 + h * 32)), odd, even);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          acc[m][v][h] = _mm256_fmadd_ps(odd, _mm256_broadcast_ss(x + m * ldx + 2 * kp + 1), acc[m][v][h]);
          acc[m][v][h] = _mm256_fmadd_ps(even, _mm256_broadcast_ss(x + m * ldx + 2 * kp), acc[m][v][h]);
        }
      }
    }
  };
  stream_panel<NV, 64, kPrefetchBytes<NV>, Far>(w.in_padded() / 2, w.panel_bytes(), step);  // a line per k-pair
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) store8(a, row0 + m, (panel0 + v) * kPanel + h * 8, acc[m][v][h]);
}

// A decode batch of 7 or 8 rows: 8 rows x 16 outputs would be 16 accumulators, more than the 16
// ymm registers hold with the weights, so the rows go over one half of the panel (8 outputs, 8
// FMA chains) and then the other, a chunk of k at a time: the chunk's weights and activations are
// in L1 for the second half, and the panel's stream from memory is spread over both. The
// accumulators wait in L1 between chunks; per output the FMA order is the scalar kernel's.
constexpr int kBatchChunkPairs = 8;  // k-pairs: 512 bytes of the panel
template <int MR>
void bf16_batch_tile(const KernelArgs& a, int row0, int panel) {
  const PackedMatrix& w = *a.w;
  const std::size_t ldx = w.in_padded();
  const float* x = a.in->bf16_f32.data() + row0 * ldx;
  const uint8_t* wp = w.panel_data(panel);
  __m256 saved[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) saved[m][0] = saved[m][1] = _mm256_setzero_ps();
  const int kpairs = w.in_padded() / 2;
  for (int kp0 = 0; kp0 < kpairs; kp0 += kBatchChunkPairs) {
    const int kp1 = std::min(kpairs, kp0 + kBatchChunkPairs);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 acc[MR];
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) acc[m] = saved[m][h];
      for (int kp = kp0; kp < kp1; ++kp) {
        if (h == 0) prefetch(wp + kp * 64 + kPrefetchBytes<1>);
        __m256 odd, even;
        bf16_pairs(_mm256_load_si256(reinterpret_cast<const __m256i*>(wp + kp * 64 + h * 32)), odd, even);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          acc[m] = _mm256_fmadd_ps(odd, _mm256_broadcast_ss(x + m * ldx + 2 * kp + 1), acc[m]);
          acc[m] = _mm256_fmadd_ps(even, _mm256_broadcast_ss(x + m * ldx + 2 * kp), acc[m]);
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) saved[m][h] = acc[m];
    }
  }
  store_panel_rows<MR>(a, row0, panel, saved);
}

// Prefill: a panel is widened to fp32 once ([k-pair][odd rows 0-7, 8-15][even rows 0-7, 8-15])
// and then used by every row block, so the inner loop is a plain fp32 kernel of 6 rows x 16
// outputs (12 accumulators; per k, 2 weight loads and 6 broadcasts feed 12 FMAs). Converting inside the
// loop instead (and + shift per weight vector) kept Zen 1 at ~65 % of its FMA peak.
void widen_bf16_panel(const PackedMatrix& w, int panel, float* dst) {
  const uint8_t* wp = w.panel_data(panel);
  for (int kp = 0; kp < w.in_padded() / 2; ++kp) {
    prefetch(wp + kp * 64 + kPrefetchBytes<1>);  // the panel's first read (from DRAM)
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 odd, even;
      bf16_pairs(_mm256_load_si256(reinterpret_cast<const __m256i*>(wp + kp * 64 + h * 32)), odd, even);
      _mm256_store_ps(dst + kp * 32 + h * 8, odd);
      _mm256_store_ps(dst + kp * 32 + 16 + h * 8, even);
    }
  }
}

template <int MR>
void bf16_prefill_tile(const KernelArgs& a, int row0, int panel, const float* wide) {
  const std::size_t ldx = a.w->in_padded();
  const float* x = a.in->bf16_f32.data() + row0 * ldx;
  __m256 acc[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  const int kpairs = a.w->in_padded() / 2;
  for (int kp = 0; kp < kpairs; ++kp) {
    #pragma GCC unroll 2
    for (int parity = 0; parity < 2; ++parity) {  // odd, then even
      const __m256 w0 = _mm256_load_ps(wide + kp * 32 + parity * 16), w1 = _mm256_load_ps(wide + kp * 32 + parity * 16 + 8);
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) {
        const __m256 xb = _mm256_broadcast_ss(x + m * ldx + 2 * kp + 1 - parity);
        acc[m][0] = _mm256_fmadd_ps(w0, xb, acc[m][0]);
        acc[m][1] = _mm256_fmadd_ps(w1, xb, acc[m][1]);
      }
    }
  }
  store_panel_rows<MR>(a, row0, panel, acc);
}

// The q8 activations of the rows from row0 on, as the integer tiles read them: codes, and per
// block the scale and sum(x).
struct Q8Rows {
  std::size_t ldx;
  int blocks;
  const int8_t* x;
  const float* scale;
  const int32_t* sum;
  Q8Rows(const KernelArgs& a, int row0)
      : ldx(a.w->in_padded()),
        blocks(a.w->blocks()),
        x(a.in->q8.data() + row0 * ldx),
        scale(a.in->scale.data() + static_cast<std::size_t>(row0) * blocks),
        sum(a.in->sum.data() + static_cast<std::size_t>(row0) * blocks) {}
};

// The K-quants: 8 of a block's scales (u8; q6_k int8) times the super-block's fp16 d (exact in fp32).
template <bool Signed>
inline __m256 k_scales(const uint8_t* at, const uint8_t* head) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(at));
  const __m256i wide = Signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(wide), _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head))));
}

// Block b's weight scales for half h of a panel (8 outputs), all formats but q6_k: ws (mxfp4:
// 2^(e - 128)), and for the formats with a min wm (q4_1 / q5_1: fp16 d and m, d * q + m; q4_k / q5_k: float(sc) * d and
// float(m) * dmin, (d * sc) * q - dmin * m).
template <WeightFormat F>
inline void half_scales(const uint8_t* sp, int b, int h, __m256& ws, __m256& wm) {
  if constexpr (block_mins(F)) {
    ws = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sp + b * 64 + h * 16)));
    wm = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sp + b * 64 + 32 + h * 16)));
  } else if constexpr (F == WeightFormat::Q4K || F == WeightFormat::Q5K) {
    const uint8_t* bs = sp + kscale_offset(F, b);
    const uint8_t* head = sp + kheader_offset(F, b);
    ws = k_scales<false>(bs + h * 8, head + h * 16);
    wm = k_scales<false>(bs + kPanel + h * 8, head + 32 + h * 16);
  } else if constexpr (F == WeightFormat::MXFP4) {
    ws = e8m0_halves(sp + b * kPanel + h * 8);
    wm = _mm256_setzero_ps();
  } else {
    ws = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sp + b * kPanel * 2 + h * 16)));
    wm = _mm256_setzero_ps();
  }
}

// One row's block into its fp32 totals: the exact int32 sums times (weight scale x activation
// scale s), then the min's term (times s * sum(x) of the block), in the scalar kernel's order.
template <WeightFormat F>
inline __m256 add_block(__m256 acc, __m256i isum, __m256 ws, __m256 wm, float s, int32_t sum) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(ws, _mm256_set1_ps(s)), acc);
  if constexpr (block_mins(F)) return _mm256_fmadd_ps(wm, _mm256_set1_ps(s * static_cast<float>(sum)), acc);
  if constexpr (F == WeightFormat::Q4K || F == WeightFormat::Q5K)
    return _mm256_fnmadd_ps(wm, _mm256_set1_ps(s * static_cast<float>(sum)), acc);
  return acc;
}

// The quantized formats (int8, q4, q5_0, q4_1, q5_1, q4_k, q5_k, q6_k, mxfp4) against q8 activations, one
// block of 32 k at a time: exact int32 sums per block (q6_k: per half), then the format's fp32 FMAs
// in the order of the AVX-512 and scalar kernels. AVX2 has no u8 x s8 -> i32 dot product:
// vpmaddubsw gives i16 pair sums and vpmaddwd widens them; both run on one pipe on Zen 1, so the
// number of them per weight byte is what the kernel's speed is. Prefetch: the panel's first pass
// (the only one in decode); Far: see prefetch_block (stream_panel.h).
template <int MR, WeightFormat F, bool Prefetch, int Far = 0>
void quant_tile(const KernelArgs& a, int row0, int panel) {
  constexpr bool Q8 = F == WeightFormat::Q8, K6 = F == WeightFormat::Q6K, mxfp4 = F == WeightFormat::MXFP4;
  constexpr bool fifth = five_bit_codes(F);  // 5-bit codes: nibble + a bit plane
  constexpr bool wide = fifth || mxfp4;      // codes above 15: int16 pair sums widened every two groups
  const PackedMatrix& w = *a.w;
  const auto [ldx, blocks, x, xscale, xsum] = Q8Rows(a, row0);
  [[maybe_unused]] const __m256i mxfp4_table = mxfp4_code_table();
  const int32_t* xsum_low = K6 ? a.in->sum_low.data() + static_cast<std::size_t>(row0) * blocks : nullptr;
  const uint8_t* wp = w.panel_data(panel);
  const uint8_t* sp = w.panel_scale_bytes(panel);
  constexpr int block_bytes = panel_block_bytes(F), scale_bytes = scale_block_bytes(F);  // per panel
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80)),
                low_nibbles = _mm256_set1_epi8(0x0f), high_bits = _mm256_set1_epi8(0x30);
  __m256 acc[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    if constexpr (Prefetch)
      prefetch_block<_MM_HINT_T0, kPrefetchBytes<1>, Far, block_bytes, scale_bytes>(wp + static_cast<std::size_t>(b) * block_bytes, sp, b);
    __m256i isum[MR][2];
    const int8_t* xb = x + b * kBlock;
    if constexpr (K6) {
      // Two halves of 16 k, each its own int32 sums and scale (as the AVX-512 kernel): 6-bit codes
      // times q8 make pair sums up to 16,002, so two groups' pairs add up in int16 before vpmaddwd.
      const uint8_t* bs = sp + kscale_offset(F, b);
      const uint8_t* head = sp + kheader_offset(F, b);
      #pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const int32_t low = xsum_low[m * blocks + b], sum = half == 0 ? low : xsum[m * blocks + b] - low;
          isum[m][0] = isum[m][1] = _mm256_set1_epi32(-32 * sum);
        }
        #pragma GCC unroll 2
        for (int gp = 0; gp < 2; ++gp) {
          __m256i pairs[MR][2];
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m) pairs[m][0] = pairs[m][1] = _mm256_setzero_si256();
          #pragma GCC unroll 2
          for (int g = 2 * gp; g < 2 * gp + 2; ++g) {
            __m256i xv[MR];
            #pragma GCC unroll 16
            for (int m = 0; m < MR; ++m) xv[m] = _mm256_set1_epi32(load_i32(xb + m * ldx + half * 16 + g * 4));
            const int shift = (g % 2) * 4 + half * 2;  // of the 2 bits, to bits 4-5
            #pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
              const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 384 + g * 64 + h * 32));
              const __m256i top = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 384 + 256 + (g / 2) * 64 + h * 32));
              const __m256i nibble = half == 0 ? _mm256_and_si256(raw, low_nibbles) : _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibbles);
              const __m256i moved = shift == 4 ? top : shift < 4 ? _mm256_slli_epi16(top, 4 - shift) : _mm256_srli_epi16(top, shift - 4);
              const __m256i code = _mm256_or_si256(nibble, _mm256_and_si256(moved, high_bits));
              #pragma GCC unroll 16
              for (int m = 0; m < MR; ++m) pairs[m][h] = _mm256_add_epi16(pairs[m][h], _mm256_maddubs_epi16(code, xv[m]));
            }
          }
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m)
            #pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) isum[m][h] = _mm256_add_epi32(isum[m][h], _mm256_madd_epi16(pairs[m][h], ones));
        }
        __m256 ws[2];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) ws[h] = k_scales<true>(bs + half * kPanel + h * 8, head + h * 16);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          const __m256 xs = _mm256_set1_ps(xscale[m * blocks + b]);
          #pragma GCC unroll 2
          for (int h = 0; h < 2; ++h)
            acc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m][h]), _mm256_mul_ps(ws[h], xs), acc[m][h]);
        }
      }
      continue;
    }
    if constexpr (Q8) {
      // Stored codes are q + 128: flip the top bit back to q, then |w| * (x with w's sign), as
      // vpmaddubsw needs one unsigned operand (|w| <= 127, so pair sums cannot saturate).
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) isum[m][0] = isum[m][1] = _mm256_setzero_si256();
      #pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        __m256i xv[MR];
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) xv[m] = _mm256_set1_epi32(load_i32(xb + m * ldx + q * 4));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 512 + q * 64 + h * 32));
          const __m256i signed_w = _mm256_xor_si256(raw, flip);
          const __m256i abs_w = _mm256_abs_epi8(signed_w);
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m) {
            const __m256i pairs = _mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(xv[m], signed_w));
            isum[m][h] = _mm256_add_epi32(isum[m][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    } else {
      // Nibbles (0..15) times q8 (|x| <= 127): a pair sum is at most 3,810, so the eight pair
      // sums of a block add up in int16 (<= 30,480) and one vpmaddwd per block widens them;
      // 5-bit codes (q5_0, q5_k: 0..31) make pair sums up to 7,874 and mxfp4's looked-up codes
      // (0..24) up to 6,096: widened every two groups.
      __m256i pairs[MR][2];
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) {
        // q4's, q5_0's and mxfp4's codes keep their +8 / +16 / +12 offset: subtract it times sum(x)
        // of the block (the formats with a min have none).
        constexpr int offset = dotted_code_offset(F);
        isum[m][0] = isum[m][1] = _mm256_set1_epi32(-offset * xsum[m * blocks + b]);
        pairs[m][0] = pairs[m][1] = _mm256_setzero_si256();
      }
      #pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        __m256i xlo[MR], xhi[MR];
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          xlo[m] = _mm256_set1_epi32(load_i32(xb + m * ldx + g * 4));
          xhi[m] = _mm256_set1_epi32(load_i32(xb + m * ldx + (g + 4) * 4));
        }
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          __m256i lo, hi;
          if constexpr (mxfp4)
            mxfp4_codes_half(wp + b * block_bytes, g, h * 32, mxfp4_table, lo, hi);
          else
            nibble_codes_half<fifth>(wp + b * block_bytes, g, h * 32, lo, hi);
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m)
            pairs[m][h] = _mm256_add_epi16(
                pairs[m][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo[m]), _mm256_maddubs_epi16(hi, xhi[m])));
        }
        if (g == 3 || (wide && g == 1))
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m)
            #pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
              isum[m][h] = _mm256_add_epi32(isum[m][h], _mm256_madd_epi16(pairs[m][h], ones));
              pairs[m][h] = _mm256_setzero_si256();
            }
      }
    }
    __m256 ws[2], wm[2];
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) half_scales<F>(sp, b, h, ws[h], wm[h]);
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m)
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h)
        acc[m][h] = add_block<F>(acc[m][h], isum[m][h], ws[h], wm[h], xscale[m * blocks + b], xsum[m * blocks + b]);
  }
  store_panel_rows<MR>(a, row0, panel, acc);
}

// Decode batches of 3 to 8 rows in int8, q4, q5_0 and mxfp4: all rows per block of 32 k while the block
// is in registers. quant_tile holds two rows' sums in registers and so went over a panel four
// times for 8 rows, unpacking the codes each time; here the codes are unpacked once per block and
// half panel (8 outputs) and the rows' fp32 accumulators wait in L1. Per row the int32 block sums
// and the FMAs are quant_tile's, so a row's bits do not depend on the batch.
template <int MR, WeightFormat F>
void quant_batch_tile(const KernelArgs& a, int row0, int panel) {
  static_assert(F == WeightFormat::Q8 || F == WeightFormat::Q4 || F == WeightFormat::Q5 || F == WeightFormat::MXFP4);
  constexpr bool Q8 = F == WeightFormat::Q8, fifth = five_bit_codes(F), mxfp4 = F == WeightFormat::MXFP4;
  constexpr bool wide = fifth || mxfp4;  // as quant_tile's
  const PackedMatrix& w = *a.w;
  const auto [ldx, blocks, x, xscale, xsum] = Q8Rows(a, row0);
  [[maybe_unused]] const __m256i mxfp4_table = mxfp4_code_table();
  const uint8_t* wp = w.panel_data(panel);
  const uint8_t* sp = w.panel_scale_bytes(panel);
  constexpr int block_bytes = panel_block_bytes(F);
  const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[MR][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    prefetch_block<_MM_HINT_T0, kPrefetchBytes<1>, 0, block_bytes, scale_block_bytes(F)>(wp + static_cast<std::size_t>(b) * block_bytes, sp, b);
    const int8_t* xb = x + b * kBlock;
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 ws, wm;
      half_scales<F>(sp, b, h, ws, wm);
      __m256i isum[MR];
      if constexpr (Q8) {
        // As quant_tile: |w| times x with w's sign, the codes of 4 k-quads (8 registers) at a time.
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) isum[m] = _mm256_setzero_si256();
        #pragma GCC unroll 2
        for (int q0 = 0; q0 < 8; q0 += 4) {
          __m256i signed_w[4], abs_w[4];
          #pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(wp + b * 512 + (q0 + q) * 64 + h * 32));
            signed_w[q] = _mm256_xor_si256(raw, flip);
            abs_w[q] = _mm256_abs_epi8(signed_w[q]);
          }
          #pragma GCC unroll 16
          for (int m = 0; m < MR; ++m)
            #pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
              const __m256i xv = _mm256_set1_epi32(load_i32(xb + m * ldx + (q0 + q) * 4));
              const __m256i pairs = _mm256_maddubs_epi16(abs_w[q], _mm256_sign_epi8(xv, signed_w[q]));
              isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(pairs, ones));
            }
        }
      } else {
        // As quant_tile: nibbles (5-bit codes: with their bit plane; mxfp4: looked up) times q8,
        // pair sums added in int16 for the whole block (5-bit, mxfp4: every two groups), q4's /
        // q5_0's / mxfp4's code offset times sum(x) after.
        __m256i lo[4], hi[4];
        #pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          if constexpr (mxfp4)
            mxfp4_codes_half(wp + b * block_bytes, g, h * 32, mxfp4_table, lo[g], hi[g]);
          else
            nibble_codes_half<fifth>(wp + b * block_bytes, g, h * 32, lo[g], hi[g]);
        }
        constexpr int offset = dotted_code_offset(F);
        #pragma GCC unroll 16
        for (int m = 0; m < MR; ++m) {
          isum[m] = _mm256_set1_epi32(-offset * xsum[m * blocks + b]);
          __m256i pairs = _mm256_setzero_si256();
          #pragma GCC unroll 4
          for (int g = 0; g < 4; ++g) {
            const __m256i xlo = _mm256_set1_epi32(load_i32(xb + m * ldx + g * 4));
            const __m256i xhi = _mm256_set1_epi32(load_i32(xb + m * ldx + (g + 4) * 4));
            pairs = _mm256_add_epi16(pairs, _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xlo), _mm256_maddubs_epi16(hi[g], xhi)));
            if (g == 3 || (wide && g == 1)) {
              isum[m] = _mm256_add_epi32(isum[m], _mm256_madd_epi16(pairs, ones));
              pairs = _mm256_setzero_si256();
            }
          }
        }
      }
      #pragma GCC unroll 16
      for (int m = 0; m < MR; ++m) acc[m][h] = add_block<F>(acc[m][h], isum[m], ws, wm, xscale[m * blocks + b], xsum[m * blocks + b]);
    }
  }
  store_panel_rows<MR>(a, row0, panel, acc);
}

// f16 weights (per k, 16 rows of fp16: two vcvtph2ps of 8) and the fp32 activations as given, per
// row and output one FMA chain in k order (f16_panels.cpp's scalar kernel). Far: see prefetch_far.
template <int MR, int NV, int Far = 0>
void f16_tile(const KernelArgs& a, int row0, int panel0) {
  const PackedMatrix& w = *a.w;
  const int in = w.in();
  const float* x = a.x + static_cast<std::size_t>(row0) * in;
  const uint8_t* wp[NV];
  #pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) wp[v] = w.panel_data(panel0 + v);
  __m256 acc[MR][NV][2];
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[m][v][0] = acc[m][v][1] = _mm256_setzero_ps();
  auto step = [&](int k, std::ptrdiff_t ahead, std::ptrdiff_t far) __attribute__((always_inline)) {
    __m256 wv[NV][2];
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (k % 2 == 0) prefetch(wp[v] + k * 32 + ahead);  // a line holds two k
      if (Far > 0 && k % 2 == 0) prefetch_far(wp[v] + k * 32 + far);
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) wv[v][h] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(wp[v] + k * 32 + h * 16)));
    }
    #pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m256 xb = _mm256_broadcast_ss(x + static_cast<std::size_t>(m) * in + k);
      #pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) acc[m][v][h] = _mm256_fmadd_ps(wv[v][h], xb, acc[m][v][h]);
    }
  };
  stream_panel<NV, 32, kPrefetchBytes<NV>, Far>(in, w.panel_bytes(), step);  // 32 bytes per k
  #pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    #pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      #pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) store8(a, row0 + m, (panel0 + v) * kPanel + h * 8, acc[m][v][h]);
}

using TileFn = void (*)(const KernelArgs&, int row0, int panel0);

template <TileFn... Fns>
constexpr std::array<TileFn, sizeof...(Fns)> table_of() { return {Fns...}; }

// bf16 decode (memory-bound): NV panels per pass with prefetching and a single row block, so
// each weight byte is read once; the last panels of a range go one at a time. Tables are indexed
// [rows - 1].
template <int NV, std::size_t N>
void run_decode(const KernelArgs& a, int pb, int pe, const std::array<TileFn, N>& wide,
                const std::array<TileFn, N>& single) {
  int p = pb;
  for (; p + NV <= pe; p += NV) wide[a.rows - 1](a, 0, p);
  for (; p < pe; ++p) single[a.rows - 1](a, 0, p);
}

// bf16 decode batches (3 to 8 rows, a server's 8 streams) keep converting the weights in registers,
// the panel read from memory once and then from L1 / L2. 3 to 6 rows: one block of all rows over
// the whole panel (12 FMA chains at most, as many as 16 ymm registers hold with the weights).
// 7 or 8 rows: bf16_batch_tile, the panel's halves in turn per chunk of k. On an Emerald Rapids
// Xeon (INFERLAB_ISA=avx2, bench kernels -t 1 --rows 8, best of 6), widening panels to fp32 first
// (the prefill path) ran 8 rows at 38-41 GFLOP/s, row blocks of 4 + 4 at 47-49, 6 + 2 at 51-58
// (the 2-row block has 4 chains: half the FMA rate), each half over the whole panel at 61 (the
// first half streams from memory at twice the rate, the second not at all), halves per chunk of
// 8 or 16 k-pairs at 74 (32: 70), about the FMA peak.
constexpr int kDecodeBatchRows = 8;
template <int RowFar>
void bf16_avx2(const KernelArgs& a, int pb, int pe) {
  if (a.rows <= 2) {  // two panels per pass: at least four independent FMA chains per row
    static constexpr auto pairs = table_of<bf16_decode_tile<1, 2, RowFar>, bf16_decode_tile<2, 2>>();
    static constexpr auto single = table_of<bf16_decode_tile<1, 1, RowFar>, bf16_decode_tile<2, 1>>();
    return run_decode<2>(a, pb, pe, pairs, single);
  }
  if (a.rows <= kDecodeBatchRows) {  // a decode batch: per panel, all rows while it is in L1 / L2
    static constexpr auto whole = table_of<bf16_decode_tile<3, 1>, bf16_decode_tile<4, 1>, bf16_decode_tile<5, 1>,
                                           bf16_decode_tile<6, 1>>();  // [rows - 3]
    static constexpr auto halves = table_of<bf16_batch_tile<7>, bf16_batch_tile<8>>();  // [rows - 7]
    static_assert(2 + whole.size() + halves.size() == kDecodeBatchRows);
    for (int p = pb; p < pe; ++p) {
      if (a.rows < 7) whole[a.rows - 3](a, 0, p);
      else halves[a.rows - 7](a, 0, p);
    }
    return;
  }
  using PrefillFn = void (*)(const KernelArgs&, int, int, const float*);
  static constexpr PrefillFn tiles[] = {bf16_prefill_tile<1>, bf16_prefill_tile<2>, bf16_prefill_tile<3>,
                                        bf16_prefill_tile<4>, bf16_prefill_tile<5>, bf16_prefill_tile<6>};
  // Row blocks of at most 6, as even as possible (8 rows: 4 + 4, not 6 + 2).
  const int blocks = (a.rows + 5) / 6, base = a.rows / blocks, longer = a.rows % blocks;
  thread_local AlignedBuffer scratch;  // per thread: the kernel pool's workers run chunks at once
  const std::size_t bytes = sizeof(float) * a.w->in_padded() * kPanel;
  if (scratch.size() < bytes) scratch = AlignedBuffer(bytes);
  float* wide = reinterpret_cast<float*>(scratch.data());
  for (int p = pb; p < pe; ++p) {
    widen_bf16_panel(*a.w, p, wide);
    for (int b = 0, row0 = 0; b < blocks; ++b) {
      const int mr = base + (b < longer ? 1 : 0);
      tiles[mr - 1](a, row0, p, wide);
      row0 += mr;
    }
  }
}
// f16: one row streams 2 panels per pass; more rows go in blocks of up to 4 over one panel, which
// stays in L1 for the next block (8 accumulators, 2 weight vectors, 1 broadcast of 16 registers).
template <int RowFar>
void f16_avx2(const KernelArgs& a, int pb, int pe) {
  if (a.rows == 1) {
    int p = pb;
    for (; p + 2 <= pe; p += 2) f16_tile<1, 2, RowFar>(a, 0, p);
    if (p < pe) f16_tile<1, 1, RowFar>(a, 0, p);
    return;
  }
  static constexpr auto tiles = table_of<f16_tile<1, 1>, f16_tile<2, 1>, f16_tile<3, 1>, f16_tile<4, 1>>();
  for (int p = pb; p < pe; ++p)
    for (int row0 = 0; row0 < a.rows; row0 += 4) tiles[std::min(4, a.rows - row0) - 1](a, row0, p);
}

// Integer tiles hold two accumulator sets (int32 per block, fp32 overall): at most 2 rows per
// pass over a panel, which stays in L1/L2 for the next row blocks; the first pass (the only one in
// decode) prefetches. One panel per pass: two panels' int16/int32 partial sums did not fit the 16
// ymm registers. Decode batches of int8 / q4 / q5_0 take quant_batch_tile: on an Emerald Rapids
// Xeon (INFERLAB_ISA=avx2, bench kernels, gate_up + down + qkv + o, best of 5) int8 at 8 rows went
// from 3178 to 2800 us at 1 thread and 1537 to 1245 at 2, at 3 and 4 rows (2 threads) 1.15x and
// 1.23x; 8 streams through the server (bench/batching.sh) int8 1.24x, q4 1.21x (docs/speed.md).
template <WeightFormat F, int RowFar>
void quant_avx2(const KernelArgs& a, int pb, int pe) {
  if constexpr (F == WeightFormat::Q8 || F == WeightFormat::Q4 || F == WeightFormat::Q5 || F == WeightFormat::MXFP4) {
    if (a.rows >= 3 && a.rows <= kDecodeBatchRows) {
      static constexpr auto batch = table_of<quant_batch_tile<3, F>, quant_batch_tile<4, F>, quant_batch_tile<5, F>,
                                             quant_batch_tile<6, F>, quant_batch_tile<7, F>, quant_batch_tile<8, F>>();
      for (int p = pb; p < pe; ++p) batch[a.rows - 3](a, 0, p);
      return;
    }
  }
  static constexpr auto first = table_of<quant_tile<1, F, true, RowFar>, quant_tile<2, F, true>>();
  static constexpr auto next = table_of<quant_tile<1, F, false>, quant_tile<2, F, false>>();
  for (int p = pb; p < pe; ++p)
    for (int row0 = 0; row0 < a.rows; row0 += 2) (row0 == 0 ? first : next)[std::min(2, a.rows - row0) - 1](a, row0, p);
}

// f32_to_bf16 on 8 lanes: round to nearest even, NaN kept quiet (as the scalar code).
inline __m128i round_to_bf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  rounded = _mm256_blendv_epi8(rounded, quiet, nan);
  // 16-bit values in 32-bit lanes -> 8 x u16 (packus keeps them: all are <= 0xffff).
  const __m256i packed = _mm256_packus_epi32(rounded, rounded);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
}

void bf16_row_avx2(const float* src, int in, int in_padded, uint16_t* dst) {
  int k = 0;
  for (; k + 8 <= in; k += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), round_to_bf16(_mm256_loadu_ps(src + k)));
  for (; k < in; ++k) dst[k] = f32_to_bf16(src[k]);
  for (k = in; k < in_padded; ++k) dst[k] = 0;
}

inline int32_t add_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// As q8_row_avx512 (and the scalar code): d = max|x| / 127, q = nearbyint(x / d) clamped to
// [-127, 127] (vcvtps2dq rounds to nearest even, as nearbyint does).
void q8_row_avx2(const float* src, int in, int blocks, int8_t* dst, float* scale, int32_t* sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  alignas(32) float tail[kBlock];
  for (int b = 0; b < blocks; ++b) {
    const int k0 = b * kBlock, left = std::clamp(in - k0, 0, kBlock);
    const float* x = src + k0;
    if (left < kBlock) {  // the last, partial block: zeros past `in`
      std::fill(tail, tail + kBlock, 0.0f);
      std::copy(x, x + left, tail);
      x = tail;
    }
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      // max(|x|, 0) with |x| as the second operand: a NaN lane yields 0, never the maximum.
      amax = _mm256_max_ps(amax, _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), _mm256_setzero_ps()));
    }
    const float d = hmax256(amax) / 127.0f;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i q[4], total = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      // Clamped as floats first: 1/d overflows to inf for a block of denormals, and x * inf must
      // give 127 as in the scalar code (vcvtps2dq would give INT_MIN). max_ps returns its second
      // operand for a NaN lane: -127.
      const __m256 clamped = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[i], vinv), lo), hi);
      // Lanes past `in` are 0 (not 0 * inv, which is NaN when inv is inf).
      const __m256i inside = _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_add_epi32(lane, _mm256_set1_epi32(8 * i)));
      q[i] = _mm256_and_si256(_mm256_cvtps_epi32(clamped), inside);
      total = _mm256_add_epi32(total, q[i]);
    }
    // int32 -> int8 in order: packs work per 128-bit lane, the permute puts the lanes back.
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i words2 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packs_epi16(words, words2), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k0), bytes);
    scale[b] = d;
    sum[b] = add_lanes(total);
  }
}

// The blocks format's 16 lanes as two ymm halves per weight row: lanes 0-7 and 8-15, each an fma
// per element.
template <int R>
void dot16_rows_avx2(const float* w, std::size_t w_stride, const float* x, int n, float* acc) {
  __m256 lo[R], hi[R];
  #pragma GCC unroll 4
  for (int i = 0; i < R; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 16) {
    const __m256 x_lo = _mm256_loadu_ps(x + k), x_hi = _mm256_loadu_ps(x + k + 8);
    #pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      lo[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * w_stride + k), x_lo, lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i * w_stride + k + 8), x_hi, hi[i]);
    }
  }
  #pragma GCC unroll 4
  for (int i = 0; i < R; ++i) _mm256_storeu_ps(acc + 16 * i, lo[i]), _mm256_storeu_ps(acc + 16 * i + 8, hi[i]);
}
// (16 ymm registers: one activation row at a time.)
void dot16_avx2(const float* w, std::size_t w_stride, int w_rows, const float* x, std::size_t x_stride, int x_rows, int n,
                float* acc) {
  static constexpr void (*fn[4])(const float*, std::size_t, const float*, int, float*) = {
      dot16_rows_avx2<1>, dot16_rows_avx2<2>, dot16_rows_avx2<3>, dot16_rows_avx2<4>};
  for (int a = 0; a < x_rows; ++a) fn[w_rows - 1](w, w_stride, x + a * x_stride, n, acc + a * 64);
}

// The kernels whose one-row tiles prefetch RowFar ahead too (prefetch_far); only those tiles differ
// between the two tables, which avx2_kernels(StreamPrefetch) picks from.
template <int RowFar>
constexpr KernelTable avx2_table{bf16_avx2<RowFar>,
                                 f16_avx2<RowFar>,
                                 quant_avx2<WeightFormat::Q8, RowFar>,
                                 quant_avx2<WeightFormat::Q4, RowFar>,
                                 quant_avx2<WeightFormat::Q5, RowFar>,
                                 quant_avx2<WeightFormat::Q4_1, RowFar>,
                                 quant_avx2<WeightFormat::Q5_1, RowFar>,
                                 quant_avx2<WeightFormat::Q4K, RowFar>,
                                 quant_avx2<WeightFormat::Q5K, RowFar>,
                                 quant_avx2<WeightFormat::Q6K, RowFar>,
                                 quant_avx2<WeightFormat::MXFP4, RowFar>,
                                 bf16_row_avx2,
                                 q8_row_avx2,
                                 /*bf16_as_f32=*/true,
                                 dot16_avx2};

}  // namespace

const KernelTable& avx2_kernels(StreamPrefetch hint) {
  return hint == StreamPrefetch::T0 ? avx2_table<kSingleRowFarBytes> : avx2_table<0>;  // nta-panels: AVX-512 only
}
const KernelTable& avx2_kernels() { return avx2_kernels(active_stream_prefetch()); }

}  // namespace inferlab::fast::detail

INFERLAB_TARGET_END
