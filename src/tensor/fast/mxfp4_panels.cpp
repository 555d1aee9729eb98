// GGUF MXFP4 matrices (gpt-oss's experts) in panels of 16 rows (the mxfp4 format, packed.h). An
// MXFP4 block is an E8M0 scale byte e and 16 bytes whose low nibble is weight j and high nibble
// weight j + 16, which is q4's panel byte for that pair: the codes move into q4's layout unchanged
// and the scale bytes sit beside them, one per (row, block), 17 bytes per 32 weights as in the file.
// So a decode batch streams an expert's weights once for all the rows routed to it with 16 outputs
// per vector, and prefill runs the integer tiles, as every int8-activation format (rows of blocks
// dequantized to fp32 per dot, the blocks format, ran at a fraction of that). Packing, the way back
// to blocks, the dequantized rows, and the scalar kernel that the AVX2 / AVX-512 ones match bit for
// bit.
//
// Per output and block of 32 inputs, with x the int8 activations and xs their scale:
//   acc = fma(float(Σ c x), 2^(e - 128) * xs, acc)
// c = twice the code's e2m1 value (an integer, -12..12: kMxfp4Codes minus kMxfp4CodeOffset,
// kernels_internal.h), so c * 2^(e - 128) is the file's weight exactly; the integer sum is exact and
// 2^(e - 128) * xs only moves xs's exponent (unless it leaves fp32's normal range), so the FMA is the
// one rounding per block, as in q4.
#include <cmath>
#include <cstring>

#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

using detail::q4_offset;

namespace {
constexpr int kMxfp4BlockBytes = 17;  // the scale byte, then 16 bytes of codes

float e8m0_half(uint8_t e) {
  const uint32_t bits = detail::e8m0_half_bits(e);
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Twice the e2m1 value of row r's code kk of block b in a panel.
int doubled_code(const uint8_t* panel, int b, int r, int kk) {
  const uint8_t byte = panel[q4_offset(b, r, kk % 16)];
  return detail::kMxfp4Codes[kk >= 16 ? byte >> 4 : byte & 0x0f] - detail::kMxfp4CodeOffset;
}
}  // namespace

PackedMatrix PackedMatrix::from_mxfp4(const uint8_t* rows, int out, int in) {
  const std::size_t row_bytes = ggml_row_bytes(kGgmlMXFP4, in);  // throws for rows of partial blocks
  PackedMatrix m;
  m.format_ = WeightFormat::MXFP4;
  m.out_ = out;
  m.in_ = m.in_padded_ = in;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.allocate_quantized_panels();  // padding rows: code 0 (+0) and scale byte 0
  const int blocks = in / kBlock;
  kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
    for (int p = static_cast<int>(begin); p < end; ++p) {
      uint8_t* panel = m.data_.data() + p * m.panel_bytes_;
      uint8_t* scales = m.scales_.data() + p * m.scale_panel_bytes_;
      for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
        const uint8_t* src = rows + static_cast<std::size_t>(p * kPanel + r) * row_bytes;
        for (int b = 0; b < blocks; ++b, src += kMxfp4BlockBytes) {
          scales[b * kPanel + r] = src[0];
          for (int j = 0; j < kBlock / 2; ++j) panel[q4_offset(b, r, j)] = src[1 + j];
        }
      }
    }
  });
  return m;
}

void PackedMatrix::mxfp4_panels_to_blocks(uint8_t* dst, int row) const {
  const int p = row / kPanel, r = row % kPanel;
  for (int b = 0; b < blocks(); ++b, dst += kMxfp4BlockBytes) {
    dst[0] = panel_scale_bytes(p)[b * kPanel + r];
    for (int j = 0; j < kBlock / 2; ++j) dst[1 + j] = panel_data(p)[q4_offset(b, r, j)];
  }
}

// The kernels' values: equal to dequantize_ggml_row's e2m1(q) * 2^(e - 127) for every scale byte but
// 255 (E8M0's NaN, which that gives as infinity).
void PackedMatrix::dequantize_mxfp4_panel_row(int row, float* dst) const {
  const int p = row / kPanel, r = row % kPanel;
  for (int b = 0; b < blocks(); ++b) {
    const float scale = e8m0_half(panel_scale_bytes(p)[b * kPanel + r]);
    for (int kk = 0; kk < kBlock; ++kk) dst[b * kBlock + kk] = static_cast<float>(doubled_code(panel_data(p), b, r, kk)) * scale;
  }
}

namespace detail {
void mxfp4_scalar(const KernelArgs& a, int panel_begin, int panel_end) {
  const PackedMatrix& w = *a.w;
  const int blocks = w.blocks();
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = w.panel_data(p);
    const uint8_t* scales = w.panel_scale_bytes(p);
    for (int r = 0; r < kPanel && p * kPanel + r < w.out(); ++r)
      for (int row = 0; row < a.rows; ++row) {
        const int8_t* x = a.in->q8.data() + static_cast<std::size_t>(row) * w.in_padded();
        float acc = 0;
        for (int b = 0; b < blocks; ++b) {
          int32_t isum = 0;
          for (int kk = 0; kk < kBlock; ++kk) isum += doubled_code(panel, b, r, kk) * x[b * kBlock + kk];
          const float scale = e8m0_half(scales[b * kPanel + r]) * a.in->scale[static_cast<std::size_t>(row) * blocks + b];
          acc = std::fma(static_cast<float>(isum), scale, acc);
        }
        store_output(a, row, p * kPanel + r, acc);
      }
  }
}
}  // namespace detail

}  // namespace inferlab::fast
