// Between the dispatcher (matmul.cpp) and the per-instruction-set kernel files.
#pragma once
#include <xmmintrin.h>

#include <bit>

#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/packed.h"

namespace inferlab::fast::detail {

struct KernelArgs {
  const PreparedInput* in = nullptr;
  const PackedMatrix* w = nullptr;
  const float* bias = nullptr;  // may be null
  float* y = nullptr;           // [rows][w->out()]
  int rows = 0;
  const float* x = nullptr;     // blocks, f16: the fp32 activations [rows][w->in()] as given
  std::size_t y_stride = 0;     // floats from one row of y to the next; 0: w->out() (a mixed matrix's part: the whole's)
};
inline std::size_t y_stride(const KernelArgs& a) { return a.y_stride ? a.y_stride : static_cast<std::size_t>(a.w->out()); }
// The scalar kernels' output: row `row`, column `col` of y, plus its bias.
inline void store_output(const KernelArgs& a, int row, int col, float acc) {
  a.y[static_cast<std::size_t>(row) * y_stride(a) + col] = acc + (a.bias ? a.bias[col] : 0.0f);
}

// q8: byte of k = block*32 + kk in a panel's row; q4: the byte whose low nibble holds kk < 16 and
// whose high nibble holds kk + 16.
inline std::size_t q8_offset(int block, int row_in_panel, int kk) {
  return static_cast<std::size_t>(block) * 512 + (kk / 4) * 64 + row_in_panel * 4 + kk % 4;
}
inline std::size_t q4_offset(int block, int row_in_panel, int kk) {
  return static_cast<std::size_t>(block) * 256 + ((kk / 4) % 4) * 64 + row_in_panel * 4 + kk % 4;
}

// Codes of 5 bits: q4's nibbles plus a plane of fifth bits (q5_high_offset).
constexpr bool five_bit_codes(WeightFormat f) { return f == WeightFormat::Q5 || f == WeightFormat::Q5_1 || f == WeightFormat::Q5K; }
// The offset an unsigned stored code carries (stored = q + offset): int8 128, q4 8, q5_0 16; the
// formats with a min or a fixed bias (q4_1, q5_1, the K-quants) none.
constexpr int stored_code_offset(WeightFormat f) {
  return f == WeightFormat::Q8 ? 128 : f == WeightFormat::Q4 ? 8 : f == WeightFormat::Q5 ? 16 : 0;
}
// q4_1 / q5_1: an fp16 d and m per (row, block), value d * q + m.
constexpr bool block_mins(WeightFormat f) { return f == WeightFormat::Q4_1 || f == WeightFormat::Q5_1; }
// mxfp4: the integer kernels look each e2m1 nibble up in kMxfp4Codes: twice its value (0, 1, 2, 3, 4,
// 6, 8, 12 and their negatives, all integers) plus kMxfp4CodeOffset, so that the codes are unsigned
// for vpdpbusd / vpmaddubsw (0..24) like q4's; the offset times the block's activation sum is taken
// off as q4's 8 is, and the scale is halved to match: value = kMxfp4Codes[q] - 12 times 2^(e - 128).
constexpr int kMxfp4CodeOffset = 12;
alignas(16) inline constexpr int8_t kMxfp4Codes[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
// The offset of the unsigned codes the integer kernels dot: the stored one, or mxfp4's looked-up one.
constexpr int dotted_code_offset(WeightFormat f) { return f == WeightFormat::MXFP4 ? kMxfp4CodeOffset : stored_code_offset(f); }
// An E8M0 scale byte's half, 2^(e - 128), exactly as fp32 bits for every byte (e 0 and 1 give the
// subnormals 2^-128 and 2^-127; e 255, E8M0's NaN, 2^127): the SIMD kernels build the same bits.
inline uint32_t e8m0_half_bits(uint32_t e) { return e >= 2 ? (e - 1) << 23 : 0x00200000u << e; }
inline float e8m0_half(uint8_t e) { return std::bit_cast<float>(e8m0_half_bits(e)); }
// Bytes per panel and block of 32 inputs: codes (panel_data) and scales (panel_scale_bytes).
constexpr int panel_block_bytes(WeightFormat f) {
  return f == WeightFormat::Q8 ? 512 : f == WeightFormat::Q6K ? 384 : five_bit_codes(f) ? 320 : 256;
}
// q4_k / q5_k / q6_k scales per panel and super-block: a header of fp16 per row (q4_k, q5_k: d[16]
// then dmin[16]; q6_k: d[16]), then per block 32 bytes (q4_k, q5_k: sc[16] then m[16], u8; q6_k:
// sc[16] of k 0-15 then sc[16] of k 16-31, int8).
constexpr int kheader_bytes(WeightFormat f) { return f == WeightFormat::Q6K ? 32 : 64; }
constexpr int scale_block_bytes(WeightFormat f) {  // the average for q4_k / q5_k / q6_k; q4_1 / q5_1: d[16], m[16]; mxfp4: e[16]
  return k_panels(f) ? (kheader_bytes(f) + 8 * 32) / 8 : block_mins(f) ? kPanel * 4 : f == WeightFormat::MXFP4 ? kPanel : kPanel * 2;
}
constexpr std::size_t kheader_offset(WeightFormat f, int block) {
  return static_cast<std::size_t>(block / 8) * (kheader_bytes(f) + 8 * 32);
}
constexpr std::size_t kscale_offset(WeightFormat f, int block) { return kheader_offset(f, block) + kheader_bytes(f) + (block % 8) * 32; }
// q6_k: the high 2 bits of code kk of a row sit in the byte at q6_high_offset, at bit q6_high_shift:
// per block, after its 256 bytes of nibbles (q4_offset), 2 x 64 bytes as [16 rows][4], vector h for
// k-quads 2h, 2h + 1 (kk < 16: bits 0-1 / 4-5) and 4 + 2h, 5 + 2h (kk >= 16: bits 2-3 / 6-7).
inline std::size_t q6_high_offset(int block, int row_in_panel, int kk) {
  return static_cast<std::size_t>(block) * 384 + 256 + ((kk / 4) % 4 / 2) * 64 + row_in_panel * 4 + kk % 4;
}
inline int q6_high_shift(int kk) { return ((kk / 4) % 2) * 4 + (kk >= 16 ? 2 : 0); }
// q5_0 / q5_k: the fifth bit of code kk of a row is bit kk / 4 (its k-quad, 0-7) of the byte at
// q5_high_offset: per block, after its 256 bytes of nibbles, 64 bytes as [16 rows][4].
inline std::size_t q5_high_offset(int block, int row_in_panel, int kk) {
  return static_cast<std::size_t>(block) * 320 + 256 + row_in_panel * 4 + kk % 4;
}
// The code of row r, input kk of block b in an int8 / q4 / q5_0 / q4_1 / q5_1 / mxfp4 panel: int8, q4
// and q5_0 signed (stored q + 128, q + 8, q + 16), q4_1 and q5_1 as stored (0..15, 0..31), mxfp4 twice
// its e2m1 value (-12..12; the scale 2^(e - 128) makes up the factor 2).
inline int panel_int_code(WeightFormat f, const uint8_t* panel, int b, int r, int kk) {
  if (f == WeightFormat::Q8) return static_cast<int>(panel[q8_offset(b, r, kk)]) - stored_code_offset(f);
  const uint8_t byte = panel[static_cast<std::size_t>(b) * panel_block_bytes(f) + q4_offset(0, r, kk % 16)];
  int q = kk >= 16 ? byte >> 4 : byte & 0x0f;
  if (f == WeightFormat::MXFP4) return kMxfp4Codes[q] - kMxfp4CodeOffset;
  if (five_bit_codes(f)) q |= ((panel[q5_high_offset(b, r, kk)] >> (kk / 4)) & 1) << 4;
  return q - stored_code_offset(f);
}

// Software prefetch in the AVX2 and AVX-512 kernels: every weight load asks for its line
// kPrefetchBytes<NV> ahead, so that a tile keeps about 6 KiB in flight over its NV panel streams.
// 1 KiB per stream (tuned with 4-panel tiles at 1 row) left the 2-panel decode-batch tiles 16-53 %
// slower at 4-8 rows on a Zen 5, and the AVX2 path 12-55 % at 1-4 rows (docs/speed.md).
// (A prefetch past the end of the weights is harmless: it never faults.)
constexpr int kBytesInFlight = 6 * 1024;
template <int NV>
constexpr int kPrefetchBytes = kBytesInFlight / NV;

// A single row (one decode stream) on AVX-512: bf16 / f16 stream 2 panels per tile, int8 / q4 / q5_0
// one (quant_row_tile), with 5 KiB in flight, prefetched with active_stream_prefetch()'s hint (cpu.h).
// On a Zen 5, non-temporally (lines read once stay out of the L2): against 4 panels with 6 KiB
// (prefetcht0), bf16 decode read 3 points more of the memory bandwidth at 1 thread; on Intel
// prefetchnta halves it (bench engine --bandwidth, docs/speed.md).
constexpr int kSingleRowBytesInFlight = 5 * 1024;
// With prefetcht0 (Intel) each of those lines is also asked for kSingleRowFarBytes ahead of each
// panel stream into the L2 (prefetcht1), so that the t0 request finds it there: on a Xeon (Emerald
// Rapids) decode read 3-4 % more at 1 thread on a Q4_0 file, 5-6 % on bf16 (8 KiB beat 12, 16 and
// 24; docs/speed.md). Not with prefetchnta (AMD), whose point is to keep these lines out of the L2.
constexpr int kSingleRowFarBytes = 8 * 1024;
// And, with prefetcht0, the scales of a one-row integer tile (AVX-512 quant_row_tile, AVX2
// quant_tile) this far ahead in their own stream (32 blocks of int8 / q4 scales): the hardware
// prefetcher alone left them late. On the same Xeon, AVX-512, a Q4_0 file's decode read 84 -> 91 %
// of the read bandwidth at 1 thread, 82 -> 87 % at 2, a Q8_0 file's 81 -> 87 % at 1 (bench engine
// --bandwidth; 512 and 2048 bytes did about as well); AVX2 int8, with the far prefetch, 80 -> 89 %.
constexpr int kSingleRowScaleBytes = 1024;

// AMX's palette-1 tile configuration (ldtilecfg's 64 bytes): each of the 16 tiles' rows and bytes
// per row (0: unused). Loaded per thread before any tile instruction.
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  constexpr AmxTileConfig& tile(int t, int tile_rows, int row_bytes) {
    rows[t] = static_cast<uint8_t>(tile_rows), bytes_per_row[t] = static_cast<uint16_t>(row_bytes);
    return *this;
  }
};
static_assert(sizeof(AmxTileConfig) == 64, "ldtilecfg reads 64 bytes");

// Each computes y for output panels [panel_begin, panel_end) and every row.
using PanelKernel = void (*)(const KernelArgs& args, int panel_begin, int panel_end);

// One activation row rounded to bf16 / quantized to q8 blocks, exactly as prepare_rows' scalar
// code does (the kernels' results must not depend on which of them prepared the row).
using Bf16RowFn = void (*)(const float* src, int in, int in_padded, uint16_t* dst);
using Q8RowFn = void (*)(const float* src, int in, int blocks, int8_t* dst, float* scale, int32_t* sum);

// For each of `x_rows` (1-4) activation rows x + a * x_stride and `w_rows` (1-4) weight rows
// w + i * w_stride: acc[(a * 4 + i) * 16 + j] = fma(w[k], x[k], that), from 0, for every k = j
// (mod 16) below n (a multiple of 16), k in order: one lane per j, the same arithmetic on every
// instruction set and for any tile (blocks format). A tile's pairs are independent FMA chains
// that share their loads: one pair alone waits on each FMA's latency.
using Dot16Fn = void (*)(const float* w, std::size_t w_stride, int w_rows, const float* x, std::size_t x_stride, int x_rows,
                         int n, float* acc);

struct KernelTable {
  PanelKernel bf16, f16, q8, q4, q5, q4_1, q5_1, q4k, q5k, q6k, mxfp4;
  Bf16RowFn bf16_row = nullptr;  // null: the scalar code in prepare_rows
  Q8RowFn q8_row = nullptr;
  bool bf16_as_f32 = false;  // the bf16 kernel reads PreparedInput::bf16_f32 (filled by prepare_rows)
  Dot16Fn dot16 = nullptr;   // null: the scalar loop
  // The int8-activation panel kernels read PreparedInput's *_by_block copies for 2 up to this many
  // rows (0: never; filled by prepare_rows).
  int by_block_rows = 0;
};

// Whether size_prepared / prepare_rows fill PreparedInput's *_by_block copies for `rows`.
inline bool reads_by_block(const KernelTable& table, int rows) { return rows >= 2 && rows <= table.by_block_rows; }

// The blocks kernels' reduction of lanes to one float, in one fixed tree (lane j + lane j + 8, then
// + 4, then (0 + 2) + (1 + 3)), so every instruction set's kernel ends with the same bits. SSE,
// which every x86-64 CPU has, does it four lanes at a time: reduce4 ends the tree on lanes 0-3
// (after the + 4 step), reduce8 / reduce16 start it from 8 / 16 lanes in memory.
inline float reduce4(__m128 four) {
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}
inline float reduce8(const float* lanes) { return reduce4(_mm_add_ps(_mm_loadu_ps(lanes), _mm_loadu_ps(lanes + 4))); }
inline float reduce16(const float* lanes) {
  return reduce4(_mm_add_ps(_mm_add_ps(_mm_loadu_ps(lanes), _mm_loadu_ps(lanes + 8)),
                            _mm_add_ps(_mm_loadu_ps(lanes + 4), _mm_loadu_ps(lanes + 12))));
}

// The blocks format's kernel over panels [panel_begin, panel_end), with this table's dot16.
void blocks_kernel(const KernelArgs& args, int panel_begin, int panel_end, Dot16Fn dot16);

// Activation rows per K-quant integer-dot call: each weight row's codes are decoded once for them.
constexpr int kIntDotRows = 6;
// Up to kIntDotRows activation rows quantized to int8 per 32 (PreparedInput's q8 / scale / sum, row a at
// q8 + a * q8_stride and scale / sum + a * blocks_stride).
struct IntDotRows {
  const int8_t* q8;
  const float* scale;
  const int32_t* sum;
  std::size_t q8_stride, blocks_stride;
  int rows;
};
// `count` consecutive weight rows of one type (row i at rows + i * row_bytes); the result of weight
// row i and activation row a, plus bias[i] (bias may be null), goes to out[a * out_stride + i].
struct IntDotWeights {
  const uint8_t* rows;
  std::size_t row_bytes;
  int count;
  float* out;
  std::size_t out_stride;
  const float* bias;
};
// Those weight rows of `type` blocks (n weights each) dotted with each of those activation rows in
// integer dot products (kquant_dot.cpp): the same value on every instruction set and for any number
// of rows. Null for the types without one (they are dequantized to fp32 and dotted with the fp32
// activations).
using GgmlIntDotFn = void (*)(const IntDotWeights& w, const IntDotRows& x, int n);
GgmlIntDotFn ggml_int_row_dot(uint32_t type, Isa isa);
// Whether some rows of a blocks matrix take ggml_int_row_dot (matmul then prepares int8 rows).
bool has_int_dot_rows(const PackedMatrix& w);

// The panel kernel of a quantized or bf16 format.
inline PanelKernel panel_kernel(const KernelTable& table, WeightFormat f) {
  switch (f) {
    case WeightFormat::BF16: return table.bf16;
    case WeightFormat::F16: return table.f16;
    case WeightFormat::Q8: return table.q8;
    case WeightFormat::Q4: return table.q4;
    case WeightFormat::Q5: return table.q5;
    case WeightFormat::Q4_1: return table.q4_1;
    case WeightFormat::Q5_1: return table.q5_1;
    case WeightFormat::Q4K: return table.q4k;
    case WeightFormat::Q5K: return table.q5k;
    case WeightFormat::Q6K: return table.q6k;
    case WeightFormat::MXFP4: return table.mxfp4;
    default: return nullptr;
  }
}
// The scalar f16 kernel (f16_panels.cpp).
void f16_scalar(const KernelArgs& args, int panel_begin, int panel_end);
// The scalar q4_k / q5_k / q6_k kernels (kquant_panels.cpp): the oracle of the SIMD ones.
void q4k_scalar(const KernelArgs& args, int panel_begin, int panel_end);
void q5k_scalar(const KernelArgs& args, int panel_begin, int panel_end);
void q6k_scalar(const KernelArgs& args, int panel_begin, int panel_end);

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();  // of active_stream_prefetch()
const KernelTable& avx2_kernels(StreamPrefetch hint);
const KernelTable& avx512_kernels();  // of active_stream_prefetch()
const KernelTable& avx512_kernels(StreamPrefetch hint);
const KernelTable& amx_kernels();  // AVX-512's with AMX prefill for int8 / q4 / q5_0
const KernelTable& active_kernels();  // for active_isa()

}  // namespace inferlab::fast::detail

namespace inferlab::fast::detail {
// prepare_input in two steps, so that many rows can be prepared in parallel.
// Also sizes what the active instruction set's kernels read besides (PreparedInput::bf16_f32).
void size_prepared(int rows, const PackedMatrix& w, PreparedInput& prepared);
// simd: the active instruction set's row functions (matmul); false: the scalar code (the oracle).
void prepare_rows(const float* x, int row_begin, int row_end, int in, const PackedMatrix& w, PreparedInput& prepared,
                  bool simd = false);
}  // namespace inferlab::fast::detail
