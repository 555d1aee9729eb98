// GGUF tensors into panels without changing a value: Q8_0 -> int8, Q4_0 -> q4, Q5_0 / Q4_1 / Q5_1
// -> panels like q4's (here), F16 (f16_panels.cpp), Q4_K / Q5_K / Q6_K (kquant_panels.cpp), MXFP4
// (mxfp4_panels.cpp); the
// blocks format (packed.h) that keeps the rest as stored, and its kernel; and the exact conversion of
// every format to blocks, so that a mix of types with a float part can be fused (q|k|v, gate|up).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/util/error.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

using detail::q4_offset;
using detail::q8_offset;

void PackedMatrix::block_rows(int first, int count, const uint8_t** rows, uint32_t* types) const {
  if (first < 0 || count < 0 || first + count > out_) fail("rows {}..{} outside a blocks matrix of {} rows", first, first + count - 1, out_);
  int begin = 0, r = first;
  for (const Segment& s : segments_) {  // one walk over the segments for the whole range
    for (; r < first + count && r < s.row_end; ++r) {
      rows[r - first] = data_.data() + s.offset + static_cast<std::size_t>(r - begin) * s.row_bytes;
      types[r - first] = s.type;
    }
    begin = s.row_end;
  }
}

const uint8_t* PackedMatrix::block_row(int r, uint32_t& type) const {
  if (r < 0 || r >= out_) fail("row {} outside a blocks matrix of {} rows", r, out_);
  const uint8_t* row;
  block_rows(r, 1, &row, &type);
  return row;
}

namespace {
bool q8_0_has_code_minus_128(const uint8_t* rows, int out, int in) {
  const std::size_t blocks = static_cast<std::size_t>(out) * (in / 32);
  for (std::size_t b = 0; b < blocks; ++b)
    for (int j = 0; j < 32; ++j)
      if (rows[b * 34 + 2 + j] == 0x80) return true;
  return false;
}
}  // namespace

PackedMatrix PackedMatrix::from_ggml(const uint8_t* rows, uint32_t ggml_type, int out, int in) {
  if (out <= 0 || in <= 0) fail("cannot pack a [{}, {}] weight: both dimensions must be positive", out, in);
  const std::size_t row_bytes = ggml_row_bytes(ggml_type, in);  // throws for unsupported types / partial blocks
  if (ggml_type == kGgmlF32) return from_f32(reinterpret_cast<const float*>(rows), out, in, WeightFormat::F32);
  if (ggml_type == kGgmlBF16) return from_bf16(reinterpret_cast<const uint16_t*>(rows), out, in, WeightFormat::BF16);
  if (ggml_type == kGgmlF16) return from_f16(reinterpret_cast<const uint16_t*>(rows), out, in);
  if (ggml_type == kGgmlQ4_K || ggml_type == kGgmlQ5_K || ggml_type == kGgmlQ6_K) return from_k_quant(rows, ggml_type, out, in);
  if (ggml_type == kGgmlMXFP4) return from_mxfp4(rows, out, in);
  // Q8_0's code -128 has no place in the int8 panels (q + 128 must stay below the q8 kernels'
  // saturation limits): ggml's quantizer never writes it; a file that does keeps its blocks.
  // Q5_0 (d * (q - 16), q of 5 bits; the Q4_K_M mixes of models whose rows are not whole 256-weight
  // super-blocks are mostly Q5_0), Q4_1 and Q5_1 (d * q + m) have panels of their own: q4's nibbles,
  // a plane of fifth bits for the 5-bit ones, and their fp16 scales (and mins) per row and block.
  const bool repack = ggml_type == kGgmlQ4_0 || ggml_type == kGgmlQ5_0 || ggml_type == kGgmlQ4_1 || ggml_type == kGgmlQ5_1 ||
                      (ggml_type == kGgmlQ8_0 && !q8_0_has_code_minus_128(rows, out, in));
  PackedMatrix m;
  m.out_ = out;
  m.in_ = in;
  m.panels_ = (out + kPanel - 1) / kPanel;
  if (!repack) {
    m.format_ = WeightFormat::Blocks;
    m.in_padded_ = in;
    m.data_ = AlignedBuffer(row_bytes * out);
    std::memcpy(m.data_.data(), rows, row_bytes * out);
    m.segments_.push_back({out, ggml_type, row_bytes, 0});
    return m;
  }
  const bool q8 = ggml_type == kGgmlQ8_0, q5 = ggml_type == kGgmlQ5_0 || ggml_type == kGgmlQ5_1;
  const bool with_min = ggml_type == kGgmlQ4_1 || ggml_type == kGgmlQ5_1;  // d, m, then as Q4_0 / Q5_0
  const int block_bytes = static_cast<int>(ggml_block(ggml_type)->bytes);
  m.format_ = q8                          ? WeightFormat::Q8
              : ggml_type == kGgmlQ5_0    ? WeightFormat::Q5
              : ggml_type == kGgmlQ4_1    ? WeightFormat::Q4_1
              : ggml_type == kGgmlQ5_1    ? WeightFormat::Q5_1
                                          : WeightFormat::Q4;
  const std::size_t panel_block = detail::panel_block_bytes(m.format_);
  m.in_padded_ = in;  // a whole number of 32-weight blocks
  const int blocks = in / kBlock;
  m.allocate_quantized_panels();
  uint16_t* scales = reinterpret_cast<uint16_t*>(m.scales_.data());
  kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
    for (int p = static_cast<int>(begin); p < end; ++p) {
      uint8_t* panel = m.data_.data() + p * m.panel_bytes_;
      for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
        const uint8_t* src = rows + static_cast<std::size_t>(p * kPanel + r) * row_bytes;
        for (int b = 0; b < blocks; ++b, src += block_bytes) {
          if (with_min) {  // d[16] then m[16] per (panel, block)
            std::memcpy(&scales[(static_cast<std::size_t>(p) * blocks + b) * 32 + r], src, 2);
            std::memcpy(&scales[(static_cast<std::size_t>(p) * blocks + b) * 32 + 16 + r], src + 2, 2);
          } else {
            std::memcpy(&scales[(static_cast<std::size_t>(p) * blocks + b) * kPanel + r], src, 2);
          }
          // Q8_0: d, 32 int8 codes -> q + 128. Q4_0: d, 16 bytes whose low nibble is weight j and
          // high nibble weight j + 16 — exactly the q4 panel's byte for the pair (j, j + 16). Q5_0:
          // d, 32 fifth bits (bit j: weight j), then Q4_0's 16 bytes of nibbles. Q4_1 / Q5_1: d, m,
          // then as Q4_0 / Q5_0.
          if (q8) {
            for (int kk = 0; kk < 32; ++kk) panel[q8_offset(b, r, kk)] = static_cast<uint8_t>(static_cast<int8_t>(src[2 + kk]) + 128);
            continue;
          }
          const uint8_t* after_scales = src + (with_min ? 4 : 2);  // then Q5's fifth bits, then the nibbles
          const uint8_t* nibbles = after_scales + (q5 ? 4 : 0);
          for (int j = 0; j < 16; ++j) panel[b * panel_block + q4_offset(0, r, j)] = nibbles[j];
          if (!q5) continue;
          uint32_t fifth;
          std::memcpy(&fifth, after_scales, 4);
          for (int kk = 0; kk < 32; ++kk)
            panel[detail::q5_high_offset(b, r, kk)] |= static_cast<uint8_t>(((fifth >> kk) & 1) << (kk / 4));
        }
      }
    }
  });
  return m;
}

PackedMatrix PackedMatrix::to_blocks() const {
  if (format_ == WeightFormat::Mixed) {
    std::vector<const PackedMatrix*> parts;
    for (const PackedMatrix& part : parts_) parts.push_back(&part);
    return concat_blocks(parts);
  }
  if (format_ == WeightFormat::Blocks) {
    PackedMatrix m;
    m.format_ = format_;
    m.out_ = out_;
    m.in_ = in_;
    m.panels_ = panels_;
    m.in_padded_ = in_padded_;
    m.segments_ = segments_;
    m.data_ = AlignedBuffer(data_.size());
    std::memcpy(m.data_.data(), data_.data(), data_.size());
    return m;
  }
  const uint32_t type = format_ == WeightFormat::F32 ? kGgmlF32 : format_ == WeightFormat::BF16 ? kGgmlBF16
                        : format_ == WeightFormat::F16 ? kGgmlF16
                        : format_ == WeightFormat::Q8  ? kGgmlQ8_0 : format_ == WeightFormat::Q4 ? kGgmlQ4_0
                        : format_ == WeightFormat::Q5  ? kGgmlQ5_0
                        : format_ == WeightFormat::Q4_1 ? kGgmlQ4_1
                        : format_ == WeightFormat::Q5_1 ? kGgmlQ5_1
                        : format_ == WeightFormat::Q4K ? kGgmlQ4_K : format_ == WeightFormat::Q5K ? kGgmlQ5_K
                        : format_ == WeightFormat::MXFP4 ? kGgmlMXFP4 : kGgmlQ6_K;
  if (int8_activations(format_) && in_ % kBlock != 0)
    fail("a {} matrix with rows of {} weights (not whole 32-weight blocks) cannot be fused with other formats", format_name(format_), in_);
  const std::size_t row_bytes = ggml_row_bytes(type, in_);
  PackedMatrix m;
  m.format_ = WeightFormat::Blocks;
  m.out_ = out_;
  m.in_ = in_;
  m.panels_ = panels_;
  m.in_padded_ = in_;
  m.data_ = AlignedBuffer(row_bytes * out_);
  m.segments_.push_back({out_, type, row_bytes, 0});
  std::vector<float> values(in_);
  for (int row = 0; row < out_; ++row) {
    uint8_t* dst = m.data_.data() + static_cast<std::size_t>(row) * row_bytes;
    const int p = row / kPanel, r = row % kPanel;
    switch (format_) {
      case WeightFormat::F32: std::memcpy(dst, f32_data() + static_cast<std::size_t>(row) * in_, row_bytes); break;
      case WeightFormat::F16:
        for (int k = 0; k < in_; ++k) std::memcpy(dst + 2 * k, panel_data(p) + (k * kPanel + r) * 2, 2);
        break;
      case WeightFormat::BF16:
        dequantize_row(row, values.data());
        for (int k = 0; k < in_; ++k) {
          const uint16_t bits = f32_to_bf16(values[k]);  // exact: the values are bf16
          std::memcpy(dst + 2 * k, &bits, 2);
        }
        break;
      case WeightFormat::Q8:
      case WeightFormat::Q4:
      case WeightFormat::Q5:
      case WeightFormat::Q4_1:
      case WeightFormat::Q5_1:
        for (int b = 0; b < in_ / kBlock; ++b) {
          uint8_t* block = dst + b * ggml_block(type)->bytes;
          const bool with_min = detail::block_mins(format_), q5 = detail::five_bit_codes(format_);
          if (with_min) {
            std::memcpy(block, &panel_scales(p)[b * 32 + r], 2);
            std::memcpy(block + 2, &panel_scales(p)[b * 32 + 16 + r], 2);
          } else {
            std::memcpy(block, &panel_scales(p)[b * kPanel + r], 2);
          }
          if (type == kGgmlQ8_0) {
            for (int kk = 0; kk < 32; ++kk) block[2 + kk] = static_cast<uint8_t>(panel_data(p)[q8_offset(b, r, kk)] - 128);
            continue;
          }
          const std::size_t panel_block = detail::panel_block_bytes(format_);
          uint8_t* after_scales = block + (with_min ? 4 : 2);
          uint8_t* nibbles = after_scales + (q5 ? 4 : 0);
          for (int j = 0; j < 16; ++j) nibbles[j] = panel_data(p)[b * panel_block + q4_offset(0, r, j)];
          if (!q5) continue;
          uint32_t fifth = 0;
          for (int kk = 0; kk < 32; ++kk) fifth |= static_cast<uint32_t>((panel_data(p)[detail::q5_high_offset(b, r, kk)] >> (kk / 4)) & 1) << kk;
          std::memcpy(after_scales, &fifth, 4);
        }
        break;
      case WeightFormat::Q4K:
      case WeightFormat::Q5K:
      case WeightFormat::Q6K: k_panels_to_blocks(dst, row); break;
      case WeightFormat::MXFP4: mxfp4_panels_to_blocks(dst, row); break;
      case WeightFormat::Mixed:
      case WeightFormat::Blocks: break;
    }
  }
  return m;
}

PackedMatrix PackedMatrix::concat_blocks(const std::vector<const PackedMatrix*>& parts) {
  std::vector<PackedMatrix> converted;
  converted.reserve(parts.size());
  std::size_t bytes = 0;
  int out = 0;
  for (const PackedMatrix* p : parts) {
    if (p->in_ != parts[0]->in_) fail("concat_rows: parts of {} and {} columns", parts[0]->in_, p->in_);
    converted.push_back(p->to_blocks());
    bytes += converted.back().data_.size();
    out += p->out_;
  }
  PackedMatrix m;
  m.format_ = WeightFormat::Blocks;
  m.out_ = out;
  m.in_ = m.in_padded_ = parts[0]->in_;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.data_ = AlignedBuffer(bytes);
  std::size_t at = 0;
  int rows = 0;
  for (const PackedMatrix& c : converted) {
    std::memcpy(m.data_.data() + at, c.data_.data(), c.data_.size());
    for (const Segment& s : c.segments_) {
      const int end = rows + s.row_end;
      if (!m.segments_.empty() && m.segments_.back().type == s.type) m.segments_.back().row_end = end;
      else m.segments_.push_back({end, s.type, s.row_bytes, at + s.offset});
    }
    at += c.data_.size();
    rows += c.out_;
  }
  return m;
}

namespace detail {

void blocks_kernel(const KernelArgs& a, int panel_begin, int panel_end, Dot16Fn dot16) {
  const PackedMatrix& w = *a.w;
  const int in = w.in(), out = w.out(), n16 = in / 16 * 16;
  thread_local std::vector<float> panel;  // per thread: the kernel pool's workers run chunks at once
  panel.resize(static_cast<std::size_t>(kPanel) * in);
  const Isa isa = active_isa();
  // Reduces a row's 16 lanes (reduce16) and writes its output.
  auto finish = [&](int row, int col, const float* acc) {
    a.y[static_cast<std::size_t>(row) * out + col] = reduce16(acc) + (a.bias ? a.bias[col] : 0.0f);
  };
  for (int p = panel_begin; p < panel_end; ++p) {
    const int rows_here = std::min(kPanel, out - p * kPanel);
    // Rows of a type with an integer dot (Q4_K, Q5_K, Q6_K): each (activation row, weight row) one
    // ggml_int_row_dot on the int8 activations; the other rows dequantized to fp32 below.
    const uint8_t* src[kPanel];
    uint32_t types[kPanel];
    w.block_rows(p * kPanel, rows_here, src, types);
    GgmlIntDotFn int_dot[kPanel];
    int int_rows = 0;
    for (int r = 0; r < rows_here; ++r) {
      const uint32_t type = types[r];
      int_dot[r] = ggml_int_row_dot(type, isa);
      if (int_dot[r]) {
        if (!a.in) fail("blocks kernel: a {} row without int8 activations (matmul prepares them)", ggml_type_name(type));
        ++int_rows;
      } else {
        dequantize_ggml_row(type, src[r], in, panel.data() + static_cast<std::size_t>(r) * in);
      }
    }
    for (int row0 = 0; int_rows > 0 && row0 < a.rows; row0 += kIntDotRows) {  // activation rows per weight decode
      const std::size_t blocks = a.in->blocks;
      const IntDotRows x{a.in->q8.data() + row0 * static_cast<std::size_t>(a.in->in_padded), a.in->scale.data() + row0 * blocks,
                         a.in->sum.data() + row0 * blocks, static_cast<std::size_t>(a.in->in_padded), blocks, std::min(kIntDotRows, a.rows - row0)};
      for (int r = 0; r < rows_here;) {  // runs of consecutive rows of one type: one call each
        if (!int_dot[r]) {
          ++r;
          continue;
        }
        int count = 1;
        while (r + count < rows_here && int_dot[r + count] == int_dot[r] && src[r + count] == src[r] + count * (src[r + 1] - src[r]))
          ++count;
        const int col = p * kPanel + r;
        const IntDotWeights rows_of_w{src[r], count > 1 ? static_cast<std::size_t>(src[r + 1] - src[r]) : 0, count,
                                      a.y + static_cast<std::size_t>(row0) * out + col, static_cast<std::size_t>(out),
                                      a.bias ? a.bias + col : nullptr};
        int_dot[r](rows_of_w, x, in);
        r += count;
      }
    }
    if (int_rows == rows_here) continue;
    // Each (activation row, weight row) pair is one 16-lane dot product in a fixed order: the
    // result does not depend on the batch, nor on the instruction set. Tiles of up to 4
    // activation rows x 4 weight rows go through dot16 (independent chains sharing their loads,
    // each pair's arithmetic unchanged).
    for (int row0 = 0; row0 < a.rows; row0 += 4) {
      const int x_rows = std::min(4, a.rows - row0);
      const float* x0 = a.x + static_cast<std::size_t>(row0) * in;
      for (int r0 = 0; r0 < rows_here; r0 += 4) {
        const int w_rows = std::min(4, rows_here - r0);
        const float* w0 = panel.data() + static_cast<std::size_t>(r0) * in;
        float acc[4][4][16];
        if (dot16) dot16(w0, in, w_rows, x0, in, x_rows, n16, acc[0][0]);
        else
          for (int xa = 0; xa < x_rows; ++xa)
            for (int i = 0; i < w_rows; ++i) {
              std::fill_n(acc[xa][i], 16, 0.0f);
              for (int k = 0; k < n16; k += 16)
                for (int j = 0; j < 16; ++j) acc[xa][i][j] = std::fma(w0[i * in + k + j], x0[xa * in + k + j], acc[xa][i][j]);
            }
        for (int xa = 0; xa < x_rows; ++xa)
          for (int i = 0; i < w_rows; ++i) {
            if (int_dot[r0 + i]) continue;  // done above (its panel row holds nothing)
            const float* wr = w0 + static_cast<std::size_t>(i) * in;
            const float* x = x0 + static_cast<std::size_t>(xa) * in;
            for (int k = n16; k < in; ++k) acc[xa][i][k % 16] = std::fma(wr[k], x[k], acc[xa][i][k % 16]);
            finish(row0 + xa, p * kPanel + r0 + i, acc[xa][i]);
          }
      }
    }
  }
}

bool has_int_dot_rows(const PackedMatrix& w) {
  if (w.format() != WeightFormat::Blocks) return false;
  for (const PackedMatrix::Segment& segment : w.segments())
    if (ggml_int_row_dot(segment.type, Isa::Scalar)) return true;
  return false;
}

}  // namespace detail
}  // namespace inferlab::fast
