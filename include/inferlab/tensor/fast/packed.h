// Weights in the dtype they are computed in, laid out for the kernels.
//
// Every format stores output rows in panels of 16 (padded with zero rows), interleaved along the
// input dimension so that one 64-byte load feeds 16 output lanes:
//   bf16: per k-pair [16 rows][2 bf16]                (vdpbf16ps operand; 2 bytes/weight)
//   f16:  GGUF F16 in panels: per k [16 rows] fp16 (f16_panels.cpp; widened to fp32 in registers
//         and dotted with the fp32 activations as given; 2 bytes/weight)
//   q8:   per block of 32 k, per k-quad [16 rows][4 u8] holding q+128, q in [-127,127], plus one
//         fp16 scale per (row, block)                 (vpdpbusd operand; 34 bytes per 32 weights)
//   q4:   per block of 32 k, 4 groups of [16 rows][4 bytes]: low nibble = k-quad g, high
//         nibble = k-quad g+4, value q in [0,15] meaning (q-8)*scale
//                                                     (18 bytes per 32 weights, like q4_0)
//   q5_0: GGUF Q5_0 in panels: q4's nibbles, the fifth bit of each code in 64 more bytes per block
//         (bit i of byte [row][t] for k-quad i), one fp16 scale per (row, block); value (q-16)*scale
//                                                     (22 bytes per 32 weights, as Q5_0)
//   q4_1, q5_1: GGUF Q4_1 / Q5_1 in panels: q4's (q5_0's) codes, unsigned, and per (row, block) an
//         fp16 d and m; value d*q + m                 (20 / 24 bytes per 32 weights, as the files)
//   q4_k: GGUF Q4_K in panels (kquant_panels.cpp): codes 0..15 as q4's, value (d*sc)*q - dmin*m;
//         per 256 k an fp16 d and dmin per row, per block a 6-bit sc and m per row (byte each)
//                                                     (148 bytes per 256 weights; Q4_K: 144)
//   q5_k: GGUF Q5_K in panels: q4_k's layout plus the fifth bit of each code, 64 bytes per block
//         (bit i of byte [row][t] for k-quad i); value (d*sc)*q - dmin*m, q in 0..31
//                                                     (180 bytes per 256 weights; Q5_K: 176)
//   q6_k: GGUF Q6_K in panels: the low 4 bits of each 6-bit code as q4's nibbles, the high 2 bits
//         in 128 more bytes per block; value (d*sc)*(q-32), one int8 sc per 16 k and row, an
//         fp16 d per 256 k and row                    (210 bytes per 256 weights, as Q6_K)
//   mixed: the rows of parts in different formats that all take int8 activations (a GGUF K-quant
//         mix: q and k in Q4_K, v in Q6_K), each part kept in its own panels and kernel; one
//         preparation of the activations and one pass of the thread pool for all of them
//   f32:  plain row-major [out][in] (OpenBLAS sgemm)
//   blocks: GGUF's own row-major rows of ggml blocks (every type when fused with a float part, and
//         Q8_0 blocks holding the code -128; see ggml_blocks.h), kept as stored; a fused matrix may
//         hold one type per row range. K-quant rows are dotted in integers with int8 activations
//         (kquant_dot.cpp), the other rows dequantized to fp32.
// Quantization follows llama.cpp's q8_0 / q4_0 (block 32, scale from the block's largest |w|).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/tensor/float16.h"

namespace inferlab::fast {

enum class WeightFormat { F32, BF16, F16, Q8, Q4, Q5, Q4_1, Q5_1, Q4K, Q5K, Q6K, MXFP4, Mixed, Blocks };

// "f32", "bf16", "f16", "int8", "q4", "q5_0", "q4_1", "q5_1", "q4_k", "q5_k", "q6_k", "mxfp4", "mixed", "blocks"
const char* format_name(WeightFormat format);
WeightFormat parse_format(const std::string& name);  // f32|fp32|float32, bf16, int8|q8|q8_0, q4|q4_0
// Bytes one weight takes in this format, scales included (for bandwidth figures); blocks and mixed:
// 0, the bytes depend on the parts (PackedMatrix::bytes()).
double bytes_per_weight(WeightFormat format);

constexpr int kPanel = 16;  // output rows per panel
constexpr int kBlock = 32;  // input elements per quantization block
constexpr int kSuperBlock = 256;  // q4_k / q5_k / q6_k: input elements per GGUF K-quant super-block

// Formats whose kernels take the activations quantized to int8 per block (PreparedInput::q8).
constexpr bool int8_activations(WeightFormat format) {
  return format == WeightFormat::Q8 || format == WeightFormat::Q4 || format == WeightFormat::Q5 || format == WeightFormat::Q4_1 ||
         format == WeightFormat::Q5_1 || format == WeightFormat::Q4K || format == WeightFormat::Q5K || format == WeightFormat::Q6K ||
         format == WeightFormat::MXFP4 || format == WeightFormat::Mixed;
}
constexpr bool k_panels(WeightFormat format) {
  return format == WeightFormat::Q4K || format == WeightFormat::Q5K || format == WeightFormat::Q6K;
}

// Buffers from this size on are 2 MiB aligned and asked for transparent huge pages (pack.cpp).
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// 64-byte aligned, zero-initialised bytes.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  std::size_t size_ = 0;  // from kHugePageBytes on, data_ is a mapping of its own; below, aligned_alloc's
};

class PackedMatrix {
 public:
  // W is [out][in] row-major (nn.Linear layout), given as fp32 or as raw bf16 bits.
  static PackedMatrix from_f32(const float* w, int out, int in, WeightFormat format);
  static PackedMatrix from_bf16(const uint16_t* w, int out, int in, WeightFormat format);
  // The rows of each part in order (q | k | v, gate | up), same input width. Panels are copied as
  // they are when every part but the last fills whole panels, else rows are repacked. Parts of
  // different formats: mixed when all take int8 activations, else rows of ggml blocks (exact).
  static PackedMatrix concat_rows(const std::vector<const PackedMatrix*>& parts);
  // `out` rows of `in` weights in a GGUF tensor type (rows of ggml blocks, ggml_blocks.h), packed
  // without changing a stored value: Q8_0 -> int8, Q4_0 -> q4, Q5_0 / Q4_1 / Q5_1 -> q5_0 / q4_1 / q5_1 (the same codes and fp16
  // scales, rearranged into panels), Q4_K / Q5_K / Q6_K -> q4_k / q5_k / q6_k, MXFP4 -> mxfp4, BF16 -> bf16, F16 -> f16,
  // F32 -> f32, every other type kept as blocks.
  static PackedMatrix from_ggml(const uint8_t* rows, uint32_t ggml_type, int out, int in);
  // The same values as rows of ggml blocks (int8 -> Q8_0, q4 -> Q4_0, q5_0 / q4_1 / q5_1 -> Q5_0 / Q4_1 / Q5_1, q4_k / q5_k /
  // q6_k -> Q4_K / Q5_K / Q6_K, mxfp4 -> MXFP4, bf16 -> BF16, f16 -> F16, f32 -> F32): exact, so matrices of different
  // formats can be fused.
  PackedMatrix to_blocks() const;

  WeightFormat format() const { return format_; }
  int out() const { return out_; }
  int in() const { return in_; }
  int panels() const { return panels_; }
  int in_padded() const { return in_padded_; }  // k rounded up to 2 (bf16) or to 32 (q8, q4); f16: k
  int blocks() const { return in_padded_ / kBlock; }
  std::size_t bytes() const;  // memory held

  // mixed: the parts, and the first row of part i in this matrix (part_rows()[i]).
  const std::vector<PackedMatrix>& parts() const { return parts_; }
  const std::vector<int>& part_rows() const { return part_rows_; }

  // Row r as fp32 exactly as the kernels see it (dequantized): out[in].
  void dequantize_row(int r, float* out) const;

  // Raw storage, for the kernels.
  const uint8_t* panel_data(int panel) const { return data_.data() + static_cast<std::size_t>(panel) * panel_bytes_; }
  std::size_t panel_bytes() const { return panel_bytes_; }
  // q8/q4/q5_0: fp16 scales [panel][block][16] (mxfp4: E8M0 bytes [panel][block][16], panel_scale_bytes).
  const uint16_t* panel_scales(int panel) const { return reinterpret_cast<const uint16_t*>(panel_scale_bytes(panel)); }
  // A panel's scales as bytes (q4_k / q6_k: see kscale_offset), scale_panel_bytes() per panel.
  const uint8_t* panel_scale_bytes(int panel) const { return scales_.data() + static_cast<std::size_t>(panel) * scale_panel_bytes_; }
  std::size_t scale_panel_bytes() const { return scale_panel_bytes_; }
  const float* f32_data() const { return reinterpret_cast<const float*>(data_.data()); }

  // blocks: the rows [row_end of the previous segment, row_end) are in ggml type `type`.
  struct Segment {
    int row_end;
    uint32_t type;
    std::size_t row_bytes, offset;  // offset of the segment's first row in the data
  };
  const std::vector<Segment>& segments() const { return segments_; }
  const uint8_t* block_row(int r, uint32_t& type) const;
  // Rows first..first + count - 1 at once: their bytes and types (one walk over the segments).
  void block_rows(int first, int count, const uint8_t** rows, uint32_t* types) const;

 private:
  static PackedMatrix concat_blocks(const std::vector<const PackedMatrix*>& parts);
  static PackedMatrix concat_mixed(const std::vector<const PackedMatrix*>& parts);
  static PackedMatrix concat_quantized_rows(const std::vector<const PackedMatrix*>& parts, int out);
  // q8/q4/q5_0/q4_k/q5_k/q6_k/mxfp4 storage for panels_ x in_padded_ (both set): code bytes filled with the zero
  // code (padding rows and columns stay zero), scales zero (q8/q4: [panel][block][16] fp16).
  void allocate_quantized_panels();
  // q4_k / q5_k / q6_k (kquant_panels.cpp): from GGUF rows, back to them, and one row as fp32.
  static PackedMatrix from_k_quant(const uint8_t* rows, uint32_t ggml_type, int out, int in);
  void k_panels_to_blocks(uint8_t* row_bytes, int row) const;
  void dequantize_k_panel_row(int row, float* dst) const;
  // mxfp4 (mxfp4_panels.cpp): from GGUF MXFP4 rows, back to them, and one row as fp32.
  static PackedMatrix from_mxfp4(const uint8_t* rows, int out, int in);
  void mxfp4_panels_to_blocks(uint8_t* row_bytes, int row) const;
  void dequantize_mxfp4_panel_row(int row, float* dst) const;
  // f16 (f16_panels.cpp): from GGUF F16 rows.
  static PackedMatrix from_f16(const uint16_t* rows, int out, int in);
  // Copies row `from` of `src` (same format and width) to row `to` of this matrix.
  void copy_quantized_row(const PackedMatrix& src, int from, int to);
  template <typename Source>
  static PackedMatrix pack(const Source& source, int out, int in, WeightFormat format);

  WeightFormat format_ = WeightFormat::F32;
  int out_ = 0, in_ = 0, panels_ = 0, in_padded_ = 0;
  std::size_t panel_bytes_ = 0, scale_panel_bytes_ = 0;
  AlignedBuffer data_, scales_;
  std::vector<Segment> segments_;  // blocks only
  std::vector<PackedMatrix> parts_;  // mixed only
  std::vector<int> part_rows_;
};

// Activations prepared once per matmul for the format's kernels (shared by every output panel).
struct PreparedInput {
  int rows = 0, in_padded = 0, blocks = 0;
  std::vector<uint16_t> bf16;    // [rows][in_padded], rounded to nearest even
  std::vector<float> bf16_f32;   // the same values as fp32, for kernels without a bf16 dot product (AVX2)
  std::vector<int8_t> q8;        // [rows][in_padded], per block q = round(x / d), d = max|x| / 127
  std::vector<float> scale;      // [rows][blocks] d
  std::vector<int32_t> sum;      // [rows][blocks] sum of q over the block
  std::vector<int32_t> sum_low;  // q6_k only: [rows][blocks] sum of q over the block's first 16
  // Decode batches (2 rows up to the active kernels' by_block_rows; empty otherwise): the same q8,
  // scale, sum and sum_low with each block's rows side by side, [blocks][rows][32] and
  // [blocks][rows], so a tile of every row reaches them all from one pointer per block.
  std::vector<int8_t> q8_by_block;
  std::vector<float> scale_by_block;
  std::vector<int32_t> sum_by_block, sum_low_by_block;
};

// Rounds / quantizes x[rows][in] the way the kernels of `format` consume it.
void prepare_input(const float* x, int rows, int in, const PackedMatrix& w, PreparedInput& prepared);

// y[rows][out] = x[rows][in] * W^T (+ bias[out] when given). Uses the kernel pool; GEMV-style
// kernels for few rows, cache-blocked tiles for many. Each row's result does not depend on how
// many rows are computed together.
void matmul(const float* x, int rows, const PackedMatrix& w, const float* bias, float* y);

// The same arithmetic in plain scalar code on the packed data (the test oracle for the SIMD paths,
// and the fallback on CPUs without AVX2).
void matmul_scalar(const float* x, int rows, const PackedMatrix& w, const float* bias, float* y);

}  // namespace inferlab::fast
