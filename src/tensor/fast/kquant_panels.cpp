// GGUF Q4_K, Q5_K and Q6_K matrices in panels of 16 rows (the q4_k / q5_k / q6_k formats, packed.h):
// the same codes and scales as the file's blocks, laid out as the q4 panels are, so a decode batch
// streams the weights once for all its rows with 16 outputs per vector (rows of blocks, dotted one
// output at a time in kquant_dot.cpp, gave 8 streams only 1.83x one stream). Packing, the way back
// to blocks, the dequantized rows, and the scalar kernels that the AVX2 / AVX-512 ones match bit
// for bit.
//
// Per output and block of 32 inputs, with x the int8 activations, xs their scale and Σx their sum:
//   q4_k, q5_k: value (d * sc) * q - dmin * m, q in 0..15 (q5_k: 0..31):
//         acc = fma(float(Σ q x), (float(sc) * d) * xs, acc);
//         acc = fma(-(float(m) * dmin), xs * float(Σx), acc)
//   q6_k: value (d * sc) * (q - 32), q in 0..63, one sc per 16 inputs (lo: k 0-15, hi: k 16-31):
//         for lo, then hi: acc = fma(float(Σ q x - 32 Σx), (float(sc) * d) * xs, acc)
// d * sc and dmin * m are exact in fp32 (an fp16 times a 6- or 8-bit integer), so the weights'
// values are the file's; the integer sums are exact, so the only roundings are those of these FMAs.
#include <cstring>

#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/util/error.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

using detail::kheader_offset;
using detail::kscale_offset;
using detail::q4_offset;
using detail::q5_high_offset;
using detail::q6_high_offset;
using detail::q6_high_shift;

namespace {
// Bytes per super-block of 256.
int k_block_bytes(WeightFormat f) { return f == WeightFormat::Q4K ? 144 : f == WeightFormat::Q5K ? 176 : 210; }

// Sets weight e (0-255) of a super-block: Q4_K's 4-bit code (64 weights per 32 bytes: low nibbles for
// sub-block 2c, high for 2c + 1); Q5_K's the same nibbles (after qh[32]) and its fifth bit, bit
// e / 32 of qh[e % 32]; Q6_K's 6-bit code (quarter c of each half: low 4 bits in
// ql[32 (c % 2) + l] >> (c < 2 ? 0 : 4), top 2 bits in qh[l] >> 2c) and its scale e / 16.
void set_q4_k_code(uint8_t* block, int e, int q, bool fifth) {
  uint8_t& byte = block[(fifth ? 48 : 16) + 32 * (e / 64) + e % 32];
  const int low = q & 0x0f;
  byte = e % 64 < 32 ? static_cast<uint8_t>((byte & 0xf0) | low) : static_cast<uint8_t>((byte & 0x0f) | (low << 4));
  if (fifth) {
    uint8_t& bits = block[16 + e % 32];
    bits = static_cast<uint8_t>((bits & ~(1 << (e / 32))) | ((q >> 4) << (e / 32)));
  }
}
void set_q6_k_code(uint8_t* block, int e, int q) {
  const int half = e / 128, c = (e % 128) / 32, l = e % 32, shift = c < 2 ? 0 : 4;
  uint8_t& low = block[64 * half + 32 * (c % 2) + l];
  low = static_cast<uint8_t>((low & ~(0x0f << shift)) | ((q & 0x0f) << shift));
  uint8_t& top = block[128 + 32 * half + l];
  top = static_cast<uint8_t>((top & ~(3 << (2 * c))) | ((q >> 4) << (2 * c)));
}

void set_k_code(WeightFormat f, uint8_t* block, int e, int q) {
  if (f == WeightFormat::Q6K) set_q6_k_code(block, e, q);
  else set_q4_k_code(block, e, q, f == WeightFormat::Q5K);
}

// A row's code kk of block b in a panel (the q4 nibble, plus q5_k's fifth bit or q6_k's high bits).
int panel_code(WeightFormat f, const uint8_t* panel, int b, int r, int kk) {
  if (f != WeightFormat::Q6K) return detail::panel_int_code(f, panel, b, r, kk);  // as stored: no offset
  const uint8_t byte = panel[b * detail::panel_block_bytes(f) + q4_offset(0, r, kk % 16)];
  const int low = kk >= 16 ? byte >> 4 : byte & 0x0f;
  return low | (((panel[q6_high_offset(b, r, kk)] >> q6_high_shift(kk)) & 3) << 4);
}

// Sub-block j's 32 codes of a super-block into row r of the panel's block (`dst`): nibble bytes
// (code t low, t + 16 high) and the 5th-bit / top-2-bit plane, a byte at a time (code by code, the
// packing took ~3 ns per weight: seconds to load a 7B file).
void pack_block_codes(WeightFormat f, const uint8_t* block, int j, uint8_t* dst, int r) {
  const uint8_t* low;  // 32 bytes whose nibble at `shift` is the block's code kk
  int shift;
  if (f == WeightFormat::Q6K) {
    const int half = j / 4, c = j % 4;  // ql[32 (c % 2) ..] >> (c < 2 ? 0 : 4); qh[l] >> 2c
    low = block + 64 * half + 32 * (c % 2), shift = c < 2 ? 0 : 4;
    const uint8_t* top = block + 128 + 32 * half;
    for (int kk = 0; kk < kBlock; ++kk)
      dst[q6_high_offset(0, r, kk)] |= static_cast<uint8_t>(((top[kk] >> (2 * c)) & 3) << q6_high_shift(kk));
  } else {  // Q4_K / Q5_K: qs[32 (j / 2) ..], low nibbles for even j; Q5_K's fifth bit: qh[kk] >> j
    const bool fifth = f == WeightFormat::Q5K;
    low = block + (fifth ? 48 : 16) + 32 * (j / 2), shift = (j % 2) * 4;
    if (fifth)
      for (int kk = 0; kk < kBlock; ++kk) dst[q5_high_offset(0, r, kk)] |= static_cast<uint8_t>(((block[16 + kk] >> j) & 1) << (kk / 4));
  }
  for (int t = 0; t < kBlock / 2; ++t)
    dst[q4_offset(0, r, t)] = static_cast<uint8_t>(((low[t] >> shift) & 0x0f) | (((low[t + 16] >> shift) & 0x0f) << 4));
}

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}
}  // namespace

PackedMatrix PackedMatrix::from_k_quant(const uint8_t* rows, uint32_t ggml_type, int out, int in) {
  const std::size_t row_bytes = ggml_row_bytes(ggml_type, in);  // throws for rows of partial super-blocks
  PackedMatrix m;
  m.format_ = ggml_type == kGgmlQ4_K ? WeightFormat::Q4K : ggml_type == kGgmlQ5_K ? WeightFormat::Q5K : WeightFormat::Q6K;
  m.out_ = out;
  m.in_ = m.in_padded_ = in;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.allocate_quantized_panels();
  const WeightFormat f = m.format_;
  const bool mins = f != WeightFormat::Q6K;  // Q4_K and Q5_K: d, dmin, scales[12] first
  kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
    for (int p = static_cast<int>(begin); p < end; ++p) {
      uint8_t* panel = m.data_.data() + p * m.panel_bytes_;
      uint8_t* scales = m.scales_.data() + p * m.scale_panel_bytes_;
      for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
        const uint8_t* row = rows + static_cast<std::size_t>(p * kPanel + r) * row_bytes;
        for (int s = 0; s < in / kSuperBlock; ++s) {
          const uint8_t* block = row + s * k_block_bytes(f);
          uint8_t* head = scales + kheader_offset(f, 8 * s);
          if (mins) {
            std::memcpy(head + 2 * r, block, 2);           // d
            std::memcpy(head + 32 + 2 * r, block + 2, 2);  // dmin
          } else {
            std::memcpy(head + 2 * r, block + 208, 2);
          }
          for (int j = 0; j < 8; ++j) {
            const int b = 8 * s + j;
            uint8_t* bs = scales + kscale_offset(f, b);
            if (mins) ggml_k4_scale_min(j, block + 4, bs[r], bs[kPanel + r]);
            else bs[r] = block[192 + 2 * j], bs[kPanel + r] = block[192 + 2 * j + 1];
            pack_block_codes(f, block, j, panel + static_cast<std::size_t>(b) * detail::panel_block_bytes(f), r);
          }
        }
      }
    }
  });
  return m;
}

void PackedMatrix::k_panels_to_blocks(uint8_t* dst, int row) const {
  const int p = row / kPanel, r = row % kPanel;
  const bool mins = format_ != WeightFormat::Q6K;
  const uint8_t* panel = panel_data(p);
  const uint8_t* scales = panel_scale_bytes(p);
  for (int s = 0; s < in_ / kSuperBlock; ++s) {
    uint8_t* block = dst + s * k_block_bytes(format_);
    const uint8_t* head = scales + kheader_offset(format_, 8 * s);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      const uint8_t* bs = scales + kscale_offset(format_, 8 * s + j);
      sc[j] = bs[r], mn[j] = bs[kPanel + r];
      for (int kk = 0; kk < kBlock; ++kk) set_k_code(format_, block, 32 * j + kk, panel_code(format_, panel, 8 * s + j, r, kk));
    }
    if (mins) {
      std::memcpy(block, head + 2 * r, 2);
      std::memcpy(block + 2, head + 32 + 2 * r, 2);
      // ggml_k4_scale_min's packing: bytes 0-3 scales 0-3 and 4-7 mins 0-3 (6 bits each, their top
      // 2 bits the high bits of scales / mins 4-7), bytes 8-11 the low nibbles of scales / mins 4-7.
      for (int j = 0; j < 4; ++j) {
        block[4 + j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        block[8 + j] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
        block[12 + j] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
      }
    } else {
      for (int j = 0; j < 8; ++j) block[192 + 2 * j] = sc[j], block[192 + 2 * j + 1] = mn[j];
      std::memcpy(block + 208, head + 2 * r, 2);
    }
  }
}

void PackedMatrix::dequantize_k_panel_row(int row, float* dst) const {
  const int p = row / kPanel, r = row % kPanel;
  const uint8_t* panel = panel_data(p);
  const uint8_t* scales = panel_scale_bytes(p);
  for (int b = 0; b < blocks(); ++b) {
    const uint8_t* head = scales + kheader_offset(format_, b);
    const uint8_t* bs = scales + kscale_offset(format_, b);
    const float d = half_at(head + 2 * r);
    for (int kk = 0; kk < kBlock; ++kk) {
      const int q = panel_code(format_, panel, b, r, kk);
      if (format_ != WeightFormat::Q6K)  // as ggml's dequantization: d1 * q - m1
        dst[b * kBlock + kk] = (d * bs[r]) * static_cast<float>(q) - half_at(head + 32 + 2 * r) * bs[kPanel + r];
      else
        dst[b * kBlock + kk] = (d * static_cast<float>(static_cast<int8_t>(bs[kk < 16 ? r : kPanel + r]))) * static_cast<float>(q - 32);
    }
  }
}

namespace detail {
namespace {
template <WeightFormat F>
void k_panels_scalar(const KernelArgs& a, int panel_begin, int panel_end) {
  const PackedMatrix& w = *a.w;
  const int blocks = w.blocks();
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = w.panel_data(p);
    const uint8_t* scales = w.panel_scale_bytes(p);
    for (int r = 0; r < kPanel && p * kPanel + r < w.out(); ++r)
      for (int row = 0; row < a.rows; ++row) {
        const int8_t* x = a.in->q8.data() + static_cast<std::size_t>(row) * w.in_padded();
        const std::size_t at = static_cast<std::size_t>(row) * blocks;
        float acc = 0;
        for (int b = 0; b < blocks; ++b) {
          const uint8_t* head = scales + kheader_offset(F, b);
          const uint8_t* bs = scales + kscale_offset(F, b);
          const float d = half_at(head + 2 * r), xs = a.in->scale[at + b];
          int32_t isum[2] = {0, 0};  // k 0-15, 16-31
          for (int kk = 0; kk < kBlock; ++kk) isum[kk / 16] += panel_code(F, panel, b, r, kk) * x[b * kBlock + kk];
          if constexpr (F != WeightFormat::Q6K) {
            const float ws = static_cast<float>(bs[r]) * d, wm = static_cast<float>(bs[kPanel + r]) * half_at(head + 32 + 2 * r);
            acc = std::fma(static_cast<float>(isum[0] + isum[1]), ws * xs, acc);
            acc = std::fma(-wm, xs * static_cast<float>(a.in->sum[at + b]), acc);
          } else {
            const int32_t low = a.in->sum_low[at + b], high = a.in->sum[at + b] - low;
            const float ws_low = static_cast<float>(static_cast<int8_t>(bs[r])) * d;
            const float ws_high = static_cast<float>(static_cast<int8_t>(bs[kPanel + r])) * d;
            acc = std::fma(static_cast<float>(isum[0] - 32 * low), ws_low * xs, acc);
            acc = std::fma(static_cast<float>(isum[1] - 32 * high), ws_high * xs, acc);
          }
        }
        store_output(a, row, p * kPanel + r, acc);
      }
  }
}
}  // namespace

void q4k_scalar(const KernelArgs& a, int panel_begin, int panel_end) { k_panels_scalar<WeightFormat::Q4K>(a, panel_begin, panel_end); }
void q5k_scalar(const KernelArgs& a, int panel_begin, int panel_end) { k_panels_scalar<WeightFormat::Q5K>(a, panel_begin, panel_end); }
void q6k_scalar(const KernelArgs& a, int panel_begin, int panel_end) { k_panels_scalar<WeightFormat::Q6K>(a, panel_begin, panel_end); }
}  // namespace detail

}  // namespace inferlab::fast
