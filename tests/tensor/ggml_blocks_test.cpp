// GGUF block types: the decoder against blocks built by hand from the format description, exact
// repacking of every type into its panels and back to the file's bytes, mixed matrices, and the
// kernels on every instruction set (bit-identical to the scalar path, rows independent of the batch,
// float64 reference; every quantized type on int8 activations), as panels and as rows of blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "isa_paths.h"

using namespace inferlab;
using namespace inferlab::fast;
using namespace inferlab::test;

namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Random rows of `type` blocks whose fp16 scales are finite and small.
std::vector<uint8_t> random_rows(uint32_t type, int out, int in, uint32_t seed) {
  const std::size_t row_bytes = ggml_row_bytes(type, in);
  std::vector<uint8_t> bytes(row_bytes * out);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const GgmlBlock block = *ggml_block(type);
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  for (std::size_t at = 0; at < bytes.size(); at += block.bytes) {
    uint8_t* b = bytes.data() + at;
    switch (type) {
      case kGgmlF16:
        for (int i = 0; i < block.bytes; i += 2) put_f16(b + i, scale(rng) * 50);
        break;
      case kGgmlQ4_1: case kGgmlQ5_1: case kGgmlQ4_K: case kGgmlQ5_K:
        put_f16(b, scale(rng));
        put_f16(b + 2, scale(rng));
        break;
      case kGgmlQ6_K: put_f16(b + 208, scale(rng) / 8); break;
      case kGgmlMXFP4: b[0] = static_cast<uint8_t>(118 + rng() % 8); break;  // scales 2^-9 .. 2^-2
      default: put_f16(b, scale(rng));
    }
  }
  return bytes;
}

// The types that run from panels of their own (Q8_0 and Q4_0 move to the int8 / q4 panels, whose
// kernels fast_kernels_test covers); every one also as rows of blocks (how it runs when fused with
// a float part).
const uint32_t kBlockTypes[] = {kGgmlF16, kGgmlQ4_1, kGgmlQ5_1, kGgmlQ5_0, kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K, kGgmlMXFP4};
WeightFormat packed_format(uint32_t type) {
  switch (type) {
    case kGgmlF16: return WeightFormat::F16;
    case kGgmlQ5_0: return WeightFormat::Q5;
    case kGgmlQ4_1: return WeightFormat::Q4_1;
    case kGgmlQ5_1: return WeightFormat::Q5_1;
    case kGgmlQ4_K: return WeightFormat::Q4K;
    case kGgmlQ5_K: return WeightFormat::Q5K;
    case kGgmlQ6_K: return WeightFormat::Q6K;
    case kGgmlMXFP4: return WeightFormat::MXFP4;
    default: return WeightFormat::Blocks;
  }
}

}  // namespace

TEST(GgmlBlocks, Q4KDecodesAsTheFormatDescribes) {
  // d = 1, dmin = 0.5; sub-block j: scale j + 1, min 2j (6-bit values packed into 12 bytes);
  // weight e has code e % 16: value d * sc * q - dmin * m.
  uint8_t block[144] = {};
  put_f16(block, 1.0f);
  put_f16(block + 2, 0.5f);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) sc[j] = j + 1 + (j >= 4 ? 40 : 0), m[j] = 2 * j + (j >= 4 ? 33 : 0);  // some above 15
  for (int j = 0; j < 4; ++j) {
    block[4 + j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    block[8 + j] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    block[12 + j] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) block[16 + 32 * c + l] = static_cast<uint8_t>(((64 * c + l) % 16) | (((64 * c + 32 + l) % 16) << 4));
  float y[256];
  dequantize_ggml_row(kGgmlQ4_K, block, 256, y);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 1.0f * sc[e / 32] * (e % 16) - 0.5f * m[e / 32]) << e;
}

TEST(GgmlBlocks, Q5_0AndQ6KDecodeAsTheFormatDescribes) {
  uint8_t q5[22] = {};
  put_f16(q5, 0.25f);
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) {
    const int q = (j * 7) % 32;  // weight j's 5-bit code
    if (q & 16) qh |= 1u << j;
    if (j < 16) q5[6 + j] = static_cast<uint8_t>((q5[6 + j] & 0xf0) | (q & 15));
    else q5[6 + j - 16] = static_cast<uint8_t>((q5[6 + j - 16] & 0x0f) | ((q & 15) << 4));
  }
  std::memcpy(q5 + 2, &qh, 4);
  float y[256];
  dequantize_ggml_row(kGgmlQ5_0, q5, 32, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.25f * static_cast<float>((j * 7) % 32 - 16)) << j;

  uint8_t q6[210] = {};
  put_f16(q6 + 208, 0.5f);
  for (int s = 0; s < 16; ++s) q6[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s - 8));
  auto code = [](int e) { return (e * 5 + 3) % 64; };
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int q1 = code(128 * h + l), q2 = code(128 * h + 32 + l), q3 = code(128 * h + 64 + l), q4 = code(128 * h + 96 + l);
      q6[64 * h + l] = static_cast<uint8_t>((q1 & 15) | ((q3 & 15) << 4));
      q6[64 * h + 32 + l] = static_cast<uint8_t>((q2 & 15) | ((q4 & 15) << 4));
      q6[128 + 32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  dequantize_ggml_row(kGgmlQ6_K, q6, 256, y);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * static_cast<float>(e / 16 - 8) * static_cast<float>(code(e) - 32)) << e;
}

// MXFP4: byte 0 an E8M0 scale 2^(e - 127), then 16 bytes of e2m1 codes (sign bit 3, exponent bits
// 2-1, mantissa bit 0: 0, 0.5, 1, 1.5, 2, 3, 4, 6), weight j in byte j's low nibble, weight j + 16
// in its high nibble. The value is computed here from the bits, not from a table.
TEST(GgmlBlocks, Mxfp4DecodesAsTheFormatDescribes) {
  auto e2m1 = [](int code) {
    const int exponent = (code >> 1) & 3, mantissa = code & 1;
    const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
    return (code & 8) ? -magnitude : magnitude;
  };
  for (int e : {0, 1, 100, 127, 130, 200}) {
    uint8_t block[17] = {};
    block[0] = static_cast<uint8_t>(e);
    auto code = [](int j) { return (j * 5 + 3) % 16; };
    for (int j = 0; j < 16; ++j) block[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
    float y[32];
    dequantize_ggml_row(kGgmlMXFP4, block, 32, y);
    for (int j = 0; j < 32; ++j)
      EXPECT_EQ(static_cast<double>(y[j]), std::ldexp(e2m1(code(j)), e - 127)) << "scale byte " << e << " weight " << j;
  }
  EXPECT_EQ(ggml_row_bytes(kGgmlMXFP4, 64), 34u);
  EXPECT_STREQ(ggml_type_name(kGgmlMXFP4), "MXFP4");
}

// The mxfp4 panels at every scale byte: E8M0's 2^(e - 127) is a subnormal fp32 for e 0 (and its
// half, which the kernels multiply by, for e 0 and 1), which the kernels build as bits on every
// instruction set. The panels' values are the file's for e 0..254; every instruction set, prefetch
// hint, thread count and batch gives the scalar kernel's bits; and those are within the
// int8-activation tolerance of a float64 dot product wherever the scales stay normal floats.
TEST(GgmlBlocks, Mxfp4PanelsAtEveryScaleByte) {
  const int out = 255, in = 64;  // row r: both blocks with scale byte r
  std::vector<uint8_t> rows = random_rows(kGgmlMXFP4, out, in, 9);
  const std::size_t row_bytes = ggml_row_bytes(kGgmlMXFP4, in);
  for (int r = 0; r < out; ++r)
    for (int b = 0; b < in / 32; ++b) rows[r * row_bytes + b * 17] = static_cast<uint8_t>(r);
  const PackedMatrix all = PackedMatrix::from_ggml(rows.data(), kGgmlMXFP4, out, in);
  ASSERT_EQ(all.format(), WeightFormat::MXFP4);
  std::vector<float> expected(in), got(in);
  for (int r = 0; r < out; ++r) {
    dequantize_ggml_row(kGgmlMXFP4, rows.data() + r * row_bytes, in, expected.data());
    all.dequantize_row(r, got.data());
    ASSERT_EQ(got, expected) << "scale byte " << r;
  }
  // Scale bytes 0..200: every product finite (2^72 times codes and activations).
  const int finite = 201;
  const PackedMatrix w = PackedMatrix::from_ggml(rows.data(), kGgmlMXFP4, finite, in);
  IsaGuard guard;
  std::mt19937 rng(10);
  std::normal_distribution<float> dist;
  for (int batch : {1, 2, 5, 8, 19}) {
    std::vector<float> x(static_cast<std::size_t>(batch) * in);
    for (auto& v : x) v = dist(rng);
    set_isa_limit(Isa::Scalar);
    std::vector<float> scalar(static_cast<std::size_t>(batch) * finite);
    matmul(x.data(), batch, w, nullptr, scalar.data());
    PreparedInput prepared;
    prepare_input(x.data(), batch, in, w, prepared);
    for (int o = 16; o < finite; ++o) {  // from 2^-112 on, scale times activation scale is a normal float
      w.dequantize_row(o, got.data());
      for (int r = 0; r < batch; ++r) {
        double acc = 0, mag = 0;
        for (int k = 0; k < in; ++k) {
          const std::size_t at = static_cast<std::size_t>(r) * in + k;
          const double term = static_cast<double>(got[k]) * prepared.q8[at] * prepared.scale[at / 32];
          acc += term, mag += std::fabs(term);
        }
        ASSERT_NEAR(scalar[static_cast<std::size_t>(r) * finite + o], acc, 2e-6 * mag) << "scale byte " << o << ", row " << r;
      }
    }
    for (Isa isa : runnable_isas())
      for (StreamPrefetch hint : prefetch_hints(isa))
        for (int threads : {1, 2}) {
          set_isa_limit(isa);
          set_stream_prefetch(hint);
          set_threads(threads);
          std::vector<float> y(scalar.size(), NAN);
          matmul(x.data(), batch, w, nullptr, y.data());
          for (std::size_t i = 0; i < y.size(); ++i)
            ASSERT_EQ(std::memcmp(&y[i], &scalar[i], 4), 0)
                << isa_name(isa) << " prefetch " << stream_prefetch_name(hint) << ", " << threads << " threads, " << batch
                << " rows: scale byte " << i % finite << " gives " << y[i] << ", the scalar kernel " << scalar[i];
        }
    set_threads(0);
  }
}

// The largest products: every code +-6 (twice: 12, which the kernels dot as 24 or 0 with their
// offset of 12) against activations all at +-127 after quantization. A block's 16 products per
// int16 lane of AVX2's vpmaddubsw sums would reach 48,768 (past int16) if they were not widened
// every two groups; each instruction set must give the exact sum, 6 * 32 per block.
TEST(GgmlBlocks, Mxfp4LargestCodesAgainstLargestActivations) {
  const int out = 16, in = 128;
  std::vector<uint8_t> rows(ggml_row_bytes(kGgmlMXFP4, in) * out);
  for (int r = 0; r < out; ++r)
    for (int b = 0; b < in / 32; ++b) {
      uint8_t* block = rows.data() + (static_cast<std::size_t>(r) * (in / 32) + b) * 17;
      block[0] = 127;                                      // 2^0
      const uint8_t code = r % 2 == 0 ? 0x07 : 0x0f;      // +6 or -6
      std::memset(block + 1, code | (code << 4), 16);
    }
  const PackedMatrix w = PackedMatrix::from_ggml(rows.data(), kGgmlMXFP4, out, in);
  IsaGuard guard;
  for (const float sign : {1.0f, -1.0f})
    for (int batch : {1, 2, 5, 8, 19}) {
      const std::vector<float> x(static_cast<std::size_t>(batch) * in, sign);
      for (Isa isa : runnable_isas())
        for (StreamPrefetch hint : prefetch_hints(isa)) {
          set_isa_limit(isa);
          set_stream_prefetch(hint);
          std::vector<float> y(static_cast<std::size_t>(batch) * out, NAN);
          matmul(x.data(), batch, w, nullptr, y.data());
          for (std::size_t i = 0; i < y.size(); ++i) {
            const double expected = (i % out % 2 == 0 ? 6.0 : -6.0) * sign * in;
            ASSERT_NEAR(y[i], expected, 1e-5 * std::fabs(expected))
                << isa_name(isa) << " prefetch " << stream_prefetch_name(hint) << ", " << batch << " rows, output " << i;
          }
        }
    }
}

TEST(GgmlBlocks, PanelTypesRepackWithoutChangingAValue) {
  for (uint32_t type : {kGgmlF16, kGgmlQ8_0, kGgmlQ5_0, kGgmlQ4_0, kGgmlQ4_1, kGgmlQ5_1, kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K, kGgmlMXFP4}) {
    const bool k_quant = type == kGgmlQ4_K || type == kGgmlQ5_K || type == kGgmlQ6_K;
    const int out = 37, in = k_quant ? 512 : 96;
    auto rows = random_rows(type, out, in, 1);
    if (type == kGgmlQ8_0)  // ggml never writes the code -128
      for (std::size_t b = 0; b < rows.size(); b += 34)
        for (int j = 0; j < 32; ++j)
          if (rows[b + 2 + j] == 0x80) rows[b + 2 + j] = 0x81;
    const PackedMatrix m = PackedMatrix::from_ggml(rows.data(), type, out, in);
    EXPECT_EQ(m.format(), type == kGgmlQ4_0 ? WeightFormat::Q4 : type == kGgmlQ8_0 ? WeightFormat::Q8 : packed_format(type));
    if (type == kGgmlF16) EXPECT_EQ(m.bytes(), static_cast<std::size_t>(m.panels()) * kPanel * in * 2);
    if (k_quant || type == kGgmlMXFP4)
      EXPECT_EQ(m.bytes(), static_cast<std::size_t>(m.panels()) * kPanel * in * bytes_per_weight(m.format()));
    std::vector<float> expected(in), got(in), back_values(in);
    const PackedMatrix back = m.to_blocks();
    for (int r = 0; r < out; ++r) {
      dequantize_ggml_row(type, rows.data() + r * ggml_row_bytes(type, in), in, expected.data());
      m.dequantize_row(r, got.data());
      ASSERT_EQ(got, expected) << ggml_type_name(type) << " row " << r;
      // Back to blocks: the same bytes.
      uint32_t t;
      const uint8_t* block_row = back.block_row(r, t);
      ASSERT_EQ(std::memcmp(block_row, rows.data() + r * ggml_row_bytes(type, in), ggml_row_bytes(type, in)), 0)
          << ggml_type_name(type) << " row " << r;
      ASSERT_EQ(t, type);
    }
  }
  // The code -128 stays in its blocks (the int8 panels hold -127..127).
  auto rows = random_rows(kGgmlQ8_0, 16, 32, 2);
  rows[5] = 0x80;
  EXPECT_EQ(PackedMatrix::from_ggml(rows.data(), kGgmlQ8_0, 16, 32).format(), WeightFormat::Blocks);
}

TEST(GgmlBlocks, KQuantAndMxfp4PanelsConcatenateWithoutChangingAValue) {
  // Parts of one K-quant type or MXFP4 (gpt-oss's gate | up): whole panels are copied (32 | 16
  // rows), ragged ones repacked row by row (20 | 17 rows); the file's bytes come back from either,
  // and each output keeps its bits.
  const int in = 512;
  for (uint32_t type : {kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K, kGgmlMXFP4})
    for (int first_rows : {32, 20}) {
      const int second_rows = first_rows == 32 ? 16 : 17;
      const auto a = random_rows(type, first_rows, in, 40), b = random_rows(type, second_rows, in, 41);
      const PackedMatrix pa = PackedMatrix::from_ggml(a.data(), type, first_rows, in);
      const PackedMatrix pb = PackedMatrix::from_ggml(b.data(), type, second_rows, in);
      const PackedMatrix fused = PackedMatrix::concat_rows({&pa, &pb});
      ASSERT_EQ(fused.format(), packed_format(type));
      const PackedMatrix back = fused.to_blocks();
      const std::size_t row_bytes = ggml_row_bytes(type, in);
      for (int r = 0; r < first_rows + second_rows; ++r) {
        uint32_t t;
        const uint8_t* got = back.block_row(r, t);
        const uint8_t* want = r < first_rows ? a.data() + r * row_bytes : b.data() + (r - first_rows) * row_bytes;
        ASSERT_EQ(std::memcmp(got, want, row_bytes), 0) << ggml_type_name(type) << " row " << r << ", first part " << first_rows;
      }
      std::mt19937 rng(type);
      std::normal_distribution<float> dist;
      std::vector<float> x(3 * in), y(3 * fused.out()), ya(3 * first_rows), yb(3 * second_rows);
      for (auto& v : x) v = dist(rng);
      matmul(x.data(), 3, fused, nullptr, y.data());
      matmul(x.data(), 3, pa, nullptr, ya.data());
      matmul(x.data(), 3, pb, nullptr, yb.data());
      for (int r = 0; r < 3; ++r)
        for (int o = 0; o < fused.out(); ++o)
          ASSERT_EQ(y[r * fused.out() + o], o < first_rows ? ya[r * first_rows + o] : yb[r * second_rows + o - first_rows])
              << ggml_type_name(type) << " output " << o;
    }
}

TEST(GgmlBlocks, PanelFormatsFuseAsAMixedMatrixWhoseRowsKeepTheirBits) {
  // A GGUF K-quant mix (q and k Q4_K, v Q6_K), with a Q8_0 part between, an MXFP4 part and a
  // second Q4_K part after: each part keeps its panels and kernel, and each row of the fused matmul
  // is the same float as in its own part's matmul, on every instruction set, thread count and batch.
  const int in = 512;
  const uint32_t types[] = {kGgmlQ4_K, kGgmlQ8_0, kGgmlQ6_K, kGgmlMXFP4, kGgmlQ4_K};
  const int outs[] = {20, 16, 5, 9, 12};
  constexpr int kParts = 5, kRows = 62;
  std::vector<PackedMatrix> parts;
  for (int i = 0; i < kParts; ++i) {
    auto rows = random_rows(types[i], outs[i], in, 20 + i);
    if (types[i] == kGgmlQ8_0)  // ggml never writes the code -128 (a file that does keeps its blocks)
      for (std::size_t b = 0; b < rows.size(); b += 34)
        for (int j = 0; j < 32; ++j)
          if (rows[b + 2 + j] == 0x80) rows[b + 2 + j] = 0x81;
    parts.push_back(PackedMatrix::from_ggml(rows.data(), types[i], outs[i], in));
  }
  const PackedMatrix fused = PackedMatrix::concat_rows({&parts[0], &parts[1], &parts[2], &parts[3], &parts[4]});
  ASSERT_EQ(fused.format(), WeightFormat::Mixed);
  ASSERT_EQ(fused.out(), kRows);
  ASSERT_EQ(fused.parts().size(), static_cast<std::size_t>(kParts));
  std::vector<float> expected(in), got(in);
  const PackedMatrix as_blocks = fused.to_blocks();
  ASSERT_EQ(as_blocks.format(), WeightFormat::Blocks);
  for (int i = 0, row = 0; i < kParts; ++i)
    for (int r = 0; r < outs[i]; ++r, ++row) {
      parts[i].dequantize_row(r, expected.data());
      fused.dequantize_row(row, got.data());
      ASSERT_EQ(got, expected) << "fused row " << row;
      as_blocks.dequantize_row(row, got.data());
      ASSERT_EQ(got, expected) << "fused row " << row << " as blocks";
    }
  IsaGuard guard;
  std::mt19937 rng(12);
  std::normal_distribution<float> dist;
  std::vector<float> bias(kRows);
  for (auto& v : bias) v = dist(rng);
  for (Isa isa : runnable_isas())
    for (int threads : {1, 2})
      for (int rows : {1, 5, 9, 17}) {
        set_isa_limit(isa);
        set_threads(threads);
        std::vector<float> x(static_cast<std::size_t>(rows) * in);
        for (auto& v : x) v = dist(rng);
        std::vector<float> y(static_cast<std::size_t>(rows) * kRows, NAN);
        matmul(x.data(), rows, fused, bias.data(), y.data());
        for (int i = 0, first = 0; i < kParts; first += outs[i], ++i) {
          std::vector<float> own(static_cast<std::size_t>(rows) * outs[i]);
          matmul(x.data(), rows, parts[i], bias.data() + first, own.data());
          for (int r = 0; r < rows; ++r)
            for (int o = 0; o < outs[i]; ++o)
              ASSERT_EQ(y[r * kRows + first + o], own[r * outs[i] + o])
                  << isa_name(isa) << ", " << threads << " threads, " << rows << " rows: part " << i << " row " << o;
        }
      }
  set_threads(0);
}

TEST(GgmlBlocks, MixedFormatsWithAFloatPartFuseIntoBlocksExactly) {
  const int in = 256;
  auto a = random_rows(kGgmlQ4_K, 20, in, 3), c = random_rows(kGgmlQ6_K, 5, in, 5);
  std::vector<float> b(16 * in);  // an F32 part (a GGUF may keep q in F32 beside quantized k / v)
  std::mt19937 frng(4);
  std::normal_distribution<float> fdist(0.0f, 0.02f);
  for (auto& v : b) v = fdist(frng);
  const PackedMatrix pa = PackedMatrix::from_ggml(a.data(), kGgmlQ4_K, 20, in);
  const PackedMatrix pb = PackedMatrix::from_ggml(reinterpret_cast<const uint8_t*>(b.data()), kGgmlF32, 16, in);
  const PackedMatrix pc = PackedMatrix::from_ggml(c.data(), kGgmlQ6_K, 5, in);
  const PackedMatrix fused = PackedMatrix::concat_rows({&pa, &pb, &pc});
  ASSERT_EQ(fused.format(), WeightFormat::Blocks);
  ASSERT_EQ(fused.out(), 41);
  std::vector<float> expected(in), got(in);
  int row = 0;
  for (const PackedMatrix* p : {&pa, &pb, &pc})
    for (int r = 0; r < p->out(); ++r, ++row) {
      p->dequantize_row(r, expected.data());
      fused.dequantize_row(row, got.data());
      ASSERT_EQ(got, expected) << "fused row " << row;
    }
  // The fused matmul: its panels mix Q4_K, F32 and Q6_K rows (integer dots for the K-quants, the
  // fp32 path for F32). Each K-quant row gives the bits it gives in its own matrix as blocks
  // (alone, Q4_K and Q6_K take their panels); the F32 rows their fp32 dot products.
  const PackedMatrix pa_blocks = pa.to_blocks(), pc_blocks = pc.to_blocks();
  IsaGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  for (Isa isa : runnable_isas())
    for (int rows : {1, 5}) {
      set_isa_limit(isa);
      std::vector<float> x(static_cast<std::size_t>(rows) * in);
      for (auto& v : x) v = dist(rng);
      std::vector<float> y(static_cast<std::size_t>(rows) * fused.out()), ya(rows * 20), yc(rows * 5);
      matmul(x.data(), rows, fused, nullptr, y.data());
      matmul(x.data(), rows, pa_blocks, nullptr, ya.data());
      matmul(x.data(), rows, pc_blocks, nullptr, yc.data());
      for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < 20; ++o) ASSERT_EQ(y[r * 41 + o], ya[r * 20 + o]) << isa_name(isa) << " Q4_K row " << o;
        for (int o = 0; o < 5; ++o) ASSERT_EQ(y[r * 41 + 36 + o], yc[r * 5 + o]) << isa_name(isa) << " Q6_K row " << o;
        for (int o = 0; o < 16; ++o) {
          pb.dequantize_row(o, expected.data());
          double dot = 0, mag = 0;
          for (int k = 0; k < in; ++k) dot += static_cast<double>(expected[k]) * x[r * in + k], mag += std::fabs(expected[k] * x[r * in + k]);
          ASSERT_NEAR(y[r * 41 + 20 + o], dot, 2e-6 * mag + 1e-6) << isa_name(isa) << " F32 row " << o;
        }
      }
    }
}

// Q5_0 and MXFP4 at prefill sizes (the other panel tests stop at 512 inputs and 70 rows): 4,864
// inputs, 110 rows (AMX's groups of rows; a 2-row last tile), 40 outputs (a pair of panels and an
// odd one); every row gives the bits it gives alone and the scalar kernel's, on every instruction
// set and at 1 and 2 threads.
TEST(GgmlBlocks, PrefillOfLongInputsGivesTheBitsOfEachRowAlone) {
  const int out = 40, in = 4864, rows = 110;
  IsaGuard guard;
  for (uint32_t type : {kGgmlQ5_0, kGgmlMXFP4}) {
    const auto bytes = random_rows(type, out, in, 30 + type);
    const PackedMatrix w = PackedMatrix::from_ggml(bytes.data(), type, out, in);
    ASSERT_EQ(w.format(), packed_format(type));
    std::mt19937 rng(31);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<std::size_t>(rows) * in), bias(out);
    for (auto& v : x) v = dist(rng);
    for (auto& v : bias) v = dist(rng);
    set_isa_limit(Isa::Scalar);
    std::vector<float> scalar(static_cast<std::size_t>(rows) * out);
    matmul(x.data(), rows, w, bias.data(), scalar.data());
    for (Isa isa : runnable_isas())
      for (int threads : {1, 2}) {
        set_isa_limit(isa);
        set_threads(threads);
        std::vector<float> batch(scalar.size(), NAN), single(out);
        matmul(x.data(), rows, w, bias.data(), batch.data());
        for (int r = 0; r < rows; ++r) {
          matmul(x.data() + static_cast<std::size_t>(r) * in, 1, w, bias.data(), single.data());
          ASSERT_EQ(std::memcmp(single.data(), batch.data() + static_cast<std::size_t>(r) * out, out * sizeof(float)), 0)
              << ggml_type_name(type) << " " << isa_name(isa) << ", " << threads << " threads: row " << r;
          ASSERT_EQ(std::memcmp(scalar.data() + static_cast<std::size_t>(r) * out, single.data(), out * sizeof(float)), 0)
              << ggml_type_name(type) << " " << isa_name(isa) << ": row " << r << " against the scalar kernel";
        }
      }
    set_threads(0);
  }
}

TEST(GgmlBlocks, KernelMatchesReferenceOnEveryIsaAndIsIndependentOfTheBatch) {
  IsaGuard guard;
  for (uint32_t type : kBlockTypes) {
    const int out = 35, in = 512;
    const auto bytes = random_rows(type, out, in, 7 + type);
    const PackedMatrix packed = PackedMatrix::from_ggml(bytes.data(), type, out, in);
    ASSERT_EQ(packed.format(), packed_format(type)) << ggml_type_name(type);
    // K-quants: their panels, and their rows as blocks (how they run when fused with other types).
    const PackedMatrix as_blocks = packed.to_blocks();
    std::vector<const PackedMatrix*> forms{&packed};
    if (packed.format() != WeightFormat::Blocks) forms.push_back(&as_blocks);
    std::mt19937 rng(type);
    std::normal_distribution<float> dist;
    for (const PackedMatrix* form : forms)
    for (int rows : {1, 2, 3, 8, 17, 70}) {
      const PackedMatrix& w = *form;
      SCOPED_TRACE(std::string(ggml_type_name(type)) + " as " + format_name(w.format()) + ", rows " + std::to_string(rows));
      std::vector<float> x(static_cast<std::size_t>(rows) * in), bias(out);
      for (auto& v : x) v = dist(rng);
      for (auto& v : bias) v = dist(rng);
      std::vector<float> y_scalar(static_cast<std::size_t>(rows) * out);
      set_isa_limit(Isa::Scalar);
      matmul(x.data(), rows, w, bias.data(), y_scalar.data());
      // Q5_0 and the K-quants take the activations quantized to int8 per 32 (integer dot products,
      // as llama.cpp's kernels): the reference uses those values; the others fp32.
      std::vector<float> x_seen = x;
      // (As blocks, only the K-quants do: kquant_dot.cpp.)
      if (int8_activations(w.format()) || (w.format() == WeightFormat::Blocks && (type == kGgmlQ4_K || type == kGgmlQ5_K || type == kGgmlQ6_K))) {
        PreparedInput prepared;
        prepare_input(x.data(), rows, in, w, prepared);
        for (std::size_t k = 0; k < x_seen.size(); ++k)
          x_seen[k] = static_cast<float>(prepared.q8[k]) * prepared.scale[k / 32];
        double moved = 0;  // the quantization must actually be there (and small)
        for (std::size_t k = 0; k < x.size(); ++k) moved = std::max(moved, std::fabs(static_cast<double>(x_seen[k]) - x[k]));
        ASSERT_GT(moved, 0.0);
        ASSERT_LT(moved, 0.05);
      }
      std::vector<float> wrow(in);
      for (int o = 0; o < out; ++o) {
        w.dequantize_row(o, wrow.data());
        for (int r = 0; r < rows; ++r) {
          double acc = bias[o], mag = std::fabs(bias[o]);
          for (int k = 0; k < in; ++k) {
            acc += static_cast<double>(wrow[k]) * x_seen[static_cast<std::size_t>(r) * in + k];
            mag += std::fabs(static_cast<double>(wrow[k]) * x_seen[static_cast<std::size_t>(r) * in + k]);
          }
          ASSERT_NEAR(y_scalar[static_cast<std::size_t>(r) * out + o], acc, 2e-6 * mag + 1e-6) << ggml_type_name(type);
        }
      }
      for (Isa isa : runnable_isas())
        for (StreamPrefetch hint : prefetch_hints(isa))
        for (int threads : {1, 2}) {
          set_isa_limit(isa);
          set_stream_prefetch(hint);
          set_threads(threads);
          const std::string path = std::string(isa_name(isa)) + " prefetch " + stream_prefetch_name(hint);
          std::vector<float> y(y_scalar.size(), NAN), single(out);
          matmul(x.data(), rows, w, bias.data(), y.data());
          ASSERT_EQ(std::memcmp(y.data(), y_scalar.data(), y.size() * 4), 0) << ggml_type_name(type) << " " << path;
          matmul(x.data() + static_cast<std::size_t>(rows - 1) * in, 1, w, bias.data(), single.data());
          ASSERT_EQ(std::memcmp(single.data(), y.data() + static_cast<std::size_t>(rows - 1) * out, out * 4), 0)
              << ggml_type_name(type) << " " << path << ": a row alone differs from the same row in a batch";
        }
      set_threads(0);
    }
  }
}

TEST(GgmlBlocks, UnsupportedTypesAndPartialBlocksAreRefusedByName) {
  uint8_t bytes[256] = {};
  EXPECT_THROW(
      {
        try {
          PackedMatrix::from_ggml(bytes, 10, 1, 256);  // Q2_K
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find("Q2_K is not supported"), std::string::npos) << e.what();
          throw;
        }
      },
      std::exception);
  EXPECT_THROW(PackedMatrix::from_ggml(bytes, kGgmlQ4_K, 1, 128), std::exception);
  EXPECT_EQ(ggml_type_name(999), nullptr);
  EXPECT_STREQ(ggml_type_name(kGgmlQ6_K), "Q6_K");
}
