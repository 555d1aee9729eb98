// GGUF MXFP4 matrices (gpt-oss's experts) in panels of 16 rows (the mxfp4 format, packed.h). An
// MXFP4 block is an E8M0 scale byte e and 16 bytes whose low nibble is weight j and high nibble
// weight j + 16, which is q4's panel byte for that pair: the codes move into q4's layout unchanged
// and the scale bytes sit beside them, one per (row, block), 17 bytes per 32 weights as in the file.
// So a decode batch streams an expert's weights once for all the rows routed to it with 16 outputs
// per vector, and prefill runs the integer tiles, as every int8-activation format (rows of blocks
// dequantized to fp32 per dot, the blocks format, ran at a fraction of that). Packing, the way back
// to blocks and the dequantized rows; the scalar kernel, which the AVX2 / AVX-512 ones match bit for
// bit, is q4's (pack.cpp's quant_scalar, with panel_int_code's code table and e8m0_half's scale).
//
// Per output and block of 32 inputs, with x the int8 activations and xs their scale:
//   acc = fma(float(Σ c x), 2^(e - 128) * xs, acc)
// c = twice the code's e2m1 value (an integer, -12..12: kMxfp4Codes minus kMxfp4CodeOffset,
// kernels_internal.h), so c * 2^(e - 128) is the file's weight exactly; the integer sum is exact and
// 2^(e - 128) * xs only moves xs's exponent (unless it leaves fp32's normal range), so the FMA is the
// one rounding per block, as in q4.
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

using detail::q4_offset;

namespace {
constexpr int kMxfp4BlockBytes = 17;  // the scale byte, then 16 bytes of codes
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
    const float scale = detail::e8m0_half(panel_scale_bytes(p)[b * kPanel + r]);
    for (int kk = 0; kk < kBlock; ++kk)
      dst[b * kBlock + kk] = static_cast<float>(detail::panel_int_code(format_, panel_data(p), b, r, kk)) * scale;
  }
}

}  // namespace inferlab::fast
