// ggml block layouts, dequantized in fp32 with the arithmetic order of the format description
// (a sub-block's scale d * sc is formed first, then multiplied by the code, then the min subtracted).
#include "inferlab/tensor/fast/ggml_blocks.h"

// The per-block loops are element-wise (no sums), so vectorising them changes no result; -O2 of
// GCC 12 leaves them scalar. Dequantization is most of the blocks kernel's time.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize")
#endif

#include <cstring>

#include "inferlab/tensor/float16.h"
#include "inferlab/util/error.h"

namespace inferlab::fast {
namespace {

uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float half(const uint8_t* p) { return f16_to_f32(u16(p)); }

void q4_0_block(const uint8_t* b, float* y) {  // d, qs[16]: low nibbles 0-15, high nibbles 16-31
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}
// MXFP4 (gpt-oss's experts): e (an E8M0 scale byte), qs[16] of e2m1 codes, low nibbles 0-15 and
// high nibbles 16-31. A code's value (sign bit 3; 0, 0.5, 1, 1.5, 2, 3, 4, 6) times 2^(e - 127);
// ggml keeps the codes doubled (0, 1, ..., 12) and the scale halved, the same products.
void mxfp4_block(const uint8_t* b, float* y) {
  static constexpr float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  // 2^(e - 127) as float bits; e 0 (2^-127) is a subnormal, e 255 (E8M0's NaN) gives +inf here.
  uint32_t bits = b[0] == 0 ? 0x00400000u : static_cast<uint32_t>(b[0]) << 23;
  float d;
  std::memcpy(&d, &bits, 4);
  for (int j = 0; j < 16; ++j) {
    y[j] = kE2M1[b[1 + j] & 0x0f] * d;
    y[j + 16] = kE2M1[b[1 + j] >> 4] * d;
  }
}
void q4_1_block(const uint8_t* b, float* y) {  // d, m, qs[16]
  const float d = half(b), m = half(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}
void q5_0_block(const uint8_t* b, float* y) {  // d, qh (32 fifth bits), qs[16]
  const float d = half(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[6 + j] & 0x0f) | (((qh >> j) & 1) << 4);
    const int hi = (b[6 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(lo - 16) * d;
    y[j + 16] = static_cast<float>(hi - 16) * d;
  }
}
void q5_1_block(const uint8_t* b, float* y) {  // d, m, qh, qs[16]
  const float d = half(b), m = half(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b[8 + j] & 0x0f) | (((qh >> j) & 1) << 4);
    const int hi = (b[8 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(lo) * d + m;
    y[j + 16] = static_cast<float>(hi) * d + m;
  }
}
void q8_0_block(const uint8_t* b, float* y) {  // d, qs[32] int8
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}
void q4_k_block(const uint8_t* b, float* y) {  // d, dmin, scales[12], qs[128]
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int chunk = 0; chunk < 4; ++chunk, q += 32, y += 64) {  // 64 weights: two sub-blocks
    uint8_t sc, m;
    ggml_k4_scale_min(2 * chunk, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    ggml_k4_scale_min(2 * chunk + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
    for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}
void q5_k_block(const uint8_t* b, float* y) {  // d, dmin, scales[12], qh[32], qs[128]
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  for (int chunk = 0; chunk < 4; ++chunk, q += 32, y += 64) {
    uint8_t sc, m;
    ggml_k4_scale_min(2 * chunk, scales, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    ggml_k4_scale_min(2 * chunk + 1, scales, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    const uint8_t u1 = static_cast<uint8_t>(1u << (2 * chunk)), u2 = static_cast<uint8_t>(2u << (2 * chunk));
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>((q[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}
void q6_k_block(const uint8_t* b, float* y) {  // ql[128], qh[64], scales[16] int8, d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  // Each half of 128 weights: four quarters of 32, quarter c's low 4 bits in the low (c = 0, 1) or
  // high (c = 2, 3) nibbles of ql[32 * (c % 2) ..], its top 2 bits at bit 2c of qh; each run of 16
  // weights has its own scale. One loop per run of 16 (the scale fixed) lets the compiler
  // vectorize it; the values are those of the format's per-element loop, (d * sc) * q.
  for (int half_block = 0; half_block < 2; ++half_block, ql += 64, qh += 32, sc += 8, y += 128)
    for (int c = 0; c < 4; ++c)
      for (int run = 0; run < 2; ++run) {
        const float scale = d * static_cast<float>(sc[run + 2 * c]);
        const uint8_t* low = ql + 32 * (c % 2) + 16 * run;
        const uint8_t* top = qh + 16 * run;
        const int shift = c < 2 ? 0 : 4;
        float* out = y + 32 * c + 16 * run;
        for (int l = 0; l < 16; ++l)
          out[l] = scale * static_cast<float>((((low[l] >> shift) & 0x0f) | (((top[l] >> (2 * c)) & 3) << 4)) - 32);
      }
}

}  // namespace

const char* ggml_type_name(uint32_t type) {
  static const char* const names[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0",  "Q5_1",  "Q8_0",
      "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",  "Q5_K",           "Q6_K",           "Q8_K",  "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S",  "IQ4_NL",  "IQ3_S", "IQ2_S",          "IQ4_XS",         "I8",    "I16",   "I32",
      "I64",     "F64",    "IQ1_M",   "BF16",  "Q4_0_4_4 (removed)", "Q4_0_4_8 (removed)", "Q4_0_8_8 (removed)",
      "TQ1_0",   "TQ2_0",  "IQ4_NL_4_4 (removed)", "IQ4_NL_4_8 (removed)", "IQ4_NL_8_8 (removed)", "MXFP4"};
  return type < sizeof(names) / sizeof(names[0]) ? names[type] : nullptr;
}

std::optional<GgmlBlock> ggml_block(uint32_t type) {
  switch (type) {
    case kGgmlF32: return GgmlBlock{1, 4};
    case kGgmlF16: return GgmlBlock{1, 2};
    case kGgmlBF16: return GgmlBlock{1, 2};
    case kGgmlQ4_0: return GgmlBlock{32, 18};
    case kGgmlQ4_1: return GgmlBlock{32, 20};
    case kGgmlQ5_0: return GgmlBlock{32, 22};
    case kGgmlQ5_1: return GgmlBlock{32, 24};
    case kGgmlQ8_0: return GgmlBlock{32, 34};
    case kGgmlQ4_K: return GgmlBlock{256, 144};
    case kGgmlQ5_K: return GgmlBlock{256, 176};
    case kGgmlQ6_K: return GgmlBlock{256, 210};
    case kGgmlMXFP4: return GgmlBlock{32, 17};
    default: return std::nullopt;
  }
}

const char* ggml_supported_types() { return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4"; }

std::size_t ggml_row_bytes(uint32_t type, int64_t n) {
  const auto block = ggml_block(type);
  if (!block) fail("tensor type {} is not supported (supported: {})", ggml_type_name(type) ? ggml_type_name(type) : "?", ggml_supported_types());
  if (n % block->elements != 0) fail("a {} row of {} weights is not a whole number of {}-weight blocks", ggml_type_name(type), n, block->elements);
  return static_cast<std::size_t>(n / block->elements) * block->bytes;
}

void dequantize_ggml_row(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  using BlockFn = void (*)(const uint8_t*, float*);
  BlockFn fn = nullptr;
  switch (type) {
    case kGgmlF32: std::memcpy(dst, src, static_cast<std::size_t>(n) * 4); return;
    case kGgmlF16: for (int64_t i = 0; i < n; ++i) dst[i] = half(src + 2 * i); return;
    case kGgmlBF16: for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(u16(src + 2 * i)); return;
    case kGgmlQ4_0: fn = q4_0_block; break;
    case kGgmlQ4_1: fn = q4_1_block; break;
    case kGgmlQ5_0: fn = q5_0_block; break;
    case kGgmlQ5_1: fn = q5_1_block; break;
    case kGgmlQ8_0: fn = q8_0_block; break;
    case kGgmlQ4_K: fn = q4_k_block; break;
    case kGgmlQ5_K: fn = q5_k_block; break;
    case kGgmlQ6_K: fn = q6_k_block; break;
    case kGgmlMXFP4: fn = mxfp4_block; break;
    default: ggml_row_bytes(type, n);  // throws the "not supported" error
  }
  const GgmlBlock block = *ggml_block(type);
  if (n % block.elements != 0) ggml_row_bytes(type, n);
  for (int64_t b = 0; b < n / block.elements; ++b) fn(src + b * block.bytes, dst + b * block.elements);
}

}  // namespace inferlab::fast
