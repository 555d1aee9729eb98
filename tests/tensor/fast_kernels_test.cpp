#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "inferlab/tensor/float16.h"
#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "isa_paths.h"
#include "tensor/fast/kernels_internal.h"

using namespace inferlab;
using namespace inferlab::fast;
using namespace inferlab::test;

namespace {

std::vector<float> random_vector(std::size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// float64 reference from first principles: dequantized weights (checked separately against the
// source) times the activations as the format rounds / quantizes them.
std::vector<double> reference(const std::vector<float>& x, int rows, const PackedMatrix& w, const float* bias,
                              std::vector<double>* magnitude) {
  const int in = w.in(), out = w.out();
  std::vector<float> xr(x);
  if (w.format() == WeightFormat::BF16) {
    for (auto& v : xr) v = bf16_to_f32(f32_to_bf16(v));
  } else if (w.format() == WeightFormat::Q8 || w.format() == WeightFormat::Q4) {
    PreparedInput p;
    prepare_input(x.data(), rows, in, w, p);
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < in; ++k)
        xr[static_cast<std::size_t>(r) * in + k] =
            static_cast<float>(p.q8[static_cast<std::size_t>(r) * p.in_padded + k]) * p.scale[r * p.blocks + k / kBlock];
  }
  std::vector<double> y(static_cast<std::size_t>(rows) * out);
  magnitude->assign(y.size(), 0.0);
  std::vector<float> wrow(in);
  for (int o = 0; o < out; ++o) {
    w.dequantize_row(o, wrow.data());
    for (int r = 0; r < rows; ++r) {
      double acc = bias ? bias[o] : 0.0, mag = bias ? std::fabs(bias[o]) : 0.0;
      for (int k = 0; k < in; ++k) {
        const double term = static_cast<double>(wrow[k]) * xr[static_cast<std::size_t>(r) * in + k];
        acc += term;
        mag += std::fabs(term);
      }
      y[static_cast<std::size_t>(r) * out + o] = acc;
      (*magnitude)[static_cast<std::size_t>(r) * out + o] = mag;
    }
  }
  return y;
}

const WeightFormat kFormats[] = {WeightFormat::BF16, WeightFormat::Q8, WeightFormat::Q4, WeightFormat::F32};

}  // namespace

TEST(Formats, ParseAndNames) {
  EXPECT_EQ(parse_format("bf16"), WeightFormat::BF16);
  EXPECT_EQ(parse_format("int8"), WeightFormat::Q8);
  EXPECT_EQ(parse_format("q8_0"), WeightFormat::Q8);
  EXPECT_EQ(parse_format("q4"), WeightFormat::Q4);
  EXPECT_EQ(parse_format("fp32"), WeightFormat::F32);
  try {
    parse_format("int3");
    FAIL() << "int3 accepted";
  } catch (const inferlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("int3"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos);
  }
  EXPECT_THROW(parse_isa("sse9"), inferlab::Error);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
}

TEST(Formats, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

#pragma GCC push_options
#pragma GCC target("f16c")
static uint16_t hardware_f16(float v) { return static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT)); }
static float hardware_f32(uint16_t h) { return _cvtsh_ss(h); }
#pragma GCC pop_options

TEST(Formats, Fp16ConversionMatchesF16C) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU to compare against";
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = bits(rng);
    // Mostly values in half's range (including subnormals), some anywhere.
    if (i % 4) b = (b & 0x807fffffu) | ((100u + b % 50u) << 23);
    float v;
    std::memcpy(&v, &b, 4);
    if (std::isnan(v)) continue;
    ASSERT_EQ(f32_to_f16(v), hardware_f16(v)) << v;
    const uint16_t h = static_cast<uint16_t>(b);
    if (((h >> 10) & 0x1f) != 0x1f) ASSERT_EQ(f16_to_f32(h), hardware_f32(h)) << h;
  }
}

TEST(Quantizers, DequantizedWeightsStayWithinHalfAStep) {
  const int out = 40, in = 100;  // neither a multiple of the panel nor of the block
  auto w = random_vector(static_cast<std::size_t>(out) * in, 1, 0.05f);
  w[5] = 0.9f;  // an outlier widens its block's step only
  for (WeightFormat format : kFormats) {
    const PackedMatrix m = PackedMatrix::from_f32(w.data(), out, in, format);
    EXPECT_EQ(m.out(), out);
    EXPECT_EQ(m.in(), in);
    std::vector<float> row(in);
    for (int r = 0; r < out; ++r) {
      m.dequantize_row(r, row.data());
      for (int b = 0; b * kBlock < in; ++b) {
        float amax = 0;
        for (int k = b * kBlock; k < std::min(in, (b + 1) * kBlock); ++k) amax = std::max(amax, std::fabs(w[r * in + k]));
        // Half a step of the format (plus the fp16 rounding of the scale).
        const float step = format == WeightFormat::Q8 ? amax / 127 : format == WeightFormat::Q4 ? amax / 8 : 0;
        for (int k = b * kBlock; k < std::min(in, (b + 1) * kBlock); ++k) {
          const float v = w[r * in + k];
          float tolerance = step * 0.5f * 1.01f + amax * 1e-3f;
          // q4's codes span -8..7 steps of a scale chosen for the least squared error (between
          // amax / 8 and amax / 6.6): a value is at most half a step away, or a whole step of
          // amax / 8 when it is of the other sign than the largest and clamped at 7.
          if (format == WeightFormat::Q4) tolerance = step * 1.01f + amax * 1e-3f;
          if (format == WeightFormat::BF16) tolerance = std::fabs(v) / 256;
          if (format == WeightFormat::F32) tolerance = 0;
          ASSERT_LE(std::fabs(row[k] - v), tolerance) << format_name(format) << " r=" << r << " k=" << k;
        }
      }
    }
  }
  EXPECT_THROW(PackedMatrix::from_f32(w.data(), 0, in, WeightFormat::Q8), inferlab::Error);
}

// int8 and q4 pick each block's scale by least squared error: never worse than q8_0's / q4_0's
// rule (d = max|x| / 127, d = signed largest / -8; fp16, codes rounded to nearest), computed here
// apart from the packer, and better on most blocks of Gaussian-like weights.
TEST(Quantizers, BlockScaleIsNeverWorseThanTheGgmlRule) {
  const int out = 64, in = 256;
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 31, 0.05f);
  for (WeightFormat format : {WeightFormat::Q8, WeightFormat::Q4}) {
    const bool q8 = format == WeightFormat::Q8;
    const PackedMatrix m = PackedMatrix::from_f32(w.data(), out, in, format);
    std::vector<float> row(in);
    int better = 0, blocks = 0;
    for (int r = 0; r < out; ++r) {
      m.dequantize_row(r, row.data());
      for (int b = 0; b < in / kBlock; ++b, ++blocks) {
        const float* x = w.data() + static_cast<std::size_t>(r) * in + b * kBlock;
        float largest = 0;
        for (int k = 0; k < kBlock; ++k)
          if (std::fabs(x[k]) > std::fabs(largest)) largest = x[k];
        const float d = inferlab::f16_to_f32(inferlab::f32_to_f16(q8 ? std::fabs(largest) / 127.0f : largest / -8.0f));
        double rule = 0, ours = 0;
        for (int k = 0; k < kBlock; ++k) {
          const int q = static_cast<int>(std::nearbyint(x[k] / d));
          const float code = static_cast<float>(q8 ? std::clamp(q, -127, 127) : std::clamp(q, -8, 7));
          rule += std::pow(static_cast<double>(x[k]) - code * d, 2);
          ours += std::pow(static_cast<double>(x[k]) - row[b * kBlock + k], 2);
        }
        EXPECT_LE(ours, rule * (1 + 1e-5) + 1e-12) << format_name(format) << " row " << r << " block " << b;
        better += ours < rule * 0.999;
      }
    }
    EXPECT_GT(better, blocks / 2) << format_name(format) << ": a better scale for only " << better << " of " << blocks << " blocks";
  }
}

TEST(Quantizers, Bf16SourceIsKeptBitExact) {
  const int out = 20, in = 33;
  auto w = random_vector(static_cast<std::size_t>(out) * in, 2);
  std::vector<uint16_t> bits(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) bits[i] = f32_to_bf16(w[i]);
  const PackedMatrix m = PackedMatrix::from_bf16(bits.data(), out, in, WeightFormat::BF16);
  std::vector<float> row(in);
  for (int r = 0; r < out; ++r) {
    m.dequantize_row(r, row.data());
    for (int k = 0; k < in; ++k) ASSERT_EQ(f32_to_bf16(row[k]), bits[r * in + k]);
  }
  EXPECT_EQ(m.bytes(), static_cast<std::size_t>(2) * 16 * 34 * 2);  // 2 panels x 16 rows x 34 (k padded) x 2 bytes
}

// Every kernel path (scalar, AVX2, AVX-512 where the CPU has them) against the float64 reference,
// over shapes with ragged panels and blocks and row counts across the decode and prefill paths.
TEST(Matmul, EveryInstructionSetMatchesTheReference) {
  IsaGuard guard;
  struct Shape {
    int out, in;
  };
  const Shape shapes[] = {{16, 32}, {37, 50}, {130, 96}, {64, 257}, {200, 64}};
  const int row_counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 33, 70};
  for (int threads : {1, 2}) {
    set_threads(threads);
    for (const Shape& s : shapes) {
      const auto w = random_vector(static_cast<std::size_t>(s.out) * s.in, 3 + s.out, 0.1f);
      const auto bias = random_vector(s.out, 4);
      for (WeightFormat format : kFormats) {
        const PackedMatrix m = PackedMatrix::from_f32(w.data(), s.out, s.in, format);
        for (int rows : row_counts) {
          const auto x = random_vector(static_cast<std::size_t>(rows) * s.in, 5 + rows);
          const bool with_bias = rows % 2 == 1;
          std::vector<double> magnitude;
          const auto expected = reference(x, rows, m, with_bias ? bias.data() : nullptr, &magnitude);
          for (Isa isa : runnable_isas()) {
            set_isa_limit(isa);
            std::vector<float> y(static_cast<std::size_t>(rows) * s.out, NAN);
            matmul(x.data(), rows, m, with_bias ? bias.data() : nullptr, y.data());
            for (std::size_t i = 0; i < y.size(); ++i)
              ASSERT_NEAR(y[i], expected[i], 2e-6 * magnitude[i] + 1e-6)
                  << format_name(format) << " " << isa_name(isa) << " threads=" << threads << " shape " << s.out << "x"
                  << s.in << " rows=" << rows << " at " << i;
          }
        }
      }
    }
  }
  set_threads(0);
}

// A row's result does not depend on which rows it is computed with (batched decode gives the same
// tokens as one stream), nor, for the same arithmetic, on the instruction set.
// The SIMD row preparation (bf16 rounding, q8 blocks) is bit-identical to the scalar code, for
// widths that are not multiples of the vector or block, and for zeros, ties, tiny, huge and NaN.
TEST(Prepare, SimdRowsEqualTheScalarRows) {
  IsaGuard guard;
  for (const int in : {1, 15, 16, 17, 31, 32, 33, 160, 896, 4864}) {
    std::vector<float> x = random_vector(static_cast<std::size_t>(in) * 3, 40 + in, 3.0f);
    for (int k = 0; k < in; ++k) x[static_cast<std::size_t>(in) + k] = 0.0f;  // an all-zero row
    const float specials[] = {1.00390625f, 1.01171875f, -2.5f, 1e-40f, -1e-39f, 3e38f, -3e38f, 0.5f, 127.5f};
    for (int k = 0; k < in && k < 9; ++k) x[static_cast<std::size_t>(2) * in + k * (in / 9 + 1) % in] = specials[k];
    x[static_cast<std::size_t>(2) * in + in / 2] = std::nanf("");
    // A first block of denormals only: 1 / d overflows to inf, so x / d is +-inf (and 0 * inf NaN).
    for (int k = 0; k < std::min(in, 32); ++k) x[k] = (k % 3 == 0 ? 0.0f : k % 3 == 1 ? 1e-40f : -3e-41f);
    const std::vector<float> w(static_cast<std::size_t>(16) * in, 0.25f);
    for (WeightFormat format : {WeightFormat::BF16, WeightFormat::Q8}) {
      const PackedMatrix m = PackedMatrix::from_f32(w.data(), 16, in, format);
      PreparedInput scalar, simd;
      detail::size_prepared(3, m, scalar);
      detail::prepare_rows(x.data(), 0, 3, in, m, scalar, false);
      for (Isa isa : runnable_isas()) {
        set_isa_limit(isa);
        detail::size_prepared(3, m, simd);
        detail::prepare_rows(x.data(), 0, 3, in, m, simd, true);
        EXPECT_EQ(simd.bf16, scalar.bf16) << format_name(format) << " " << isa_name(isa) << " in=" << in;
        EXPECT_EQ(simd.q8, scalar.q8) << format_name(format) << " " << isa_name(isa) << " in=" << in;
        EXPECT_EQ(simd.sum, scalar.sum) << format_name(format) << " " << isa_name(isa) << " in=" << in;
        ASSERT_EQ(simd.scale.size(), scalar.scale.size());
        for (std::size_t i = 0; i < simd.scale.size(); ++i)
          if (!(std::isnan(simd.scale[i]) && std::isnan(scalar.scale[i])))
            EXPECT_EQ(simd.scale[i], scalar.scale[i]) << isa_name(isa) << " in=" << in << " block " << i;
      }
    }
  }
}

TEST(Matmul, RowsAreIndependentOfBatchAndMatchTheScalarPath) {
  IsaGuard guard;
  const int out = 96, in = 160;
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 11, 0.1f);
  // 2 rows take the few-rows tiles, 5, 7 and 8 the decode-batch tiles (AVX-512: both from the
  // activations' *_by_block copies; AVX2: quant_batch_tile, and for bf16 7 and 8 rows a half
  // panel at a time), 21 the prefill tiles. (Q5_0's batches: GgmlBlocks.KernelMatchesReference...)
  for (const int rows : {2, 5, 7, 8, 21})
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::Q8, WeightFormat::Q4}) {
    const auto x = random_vector(static_cast<std::size_t>(rows) * in, 12);
    const PackedMatrix m = PackedMatrix::from_f32(w.data(), out, in, format);
    set_isa_limit(Isa::Scalar);
    std::vector<float> scalar(static_cast<std::size_t>(rows) * out);
    matmul(x.data(), rows, m, nullptr, scalar.data());
    for (Isa isa : runnable_isas())
    for (StreamPrefetch hint : prefetch_hints(isa)) {
      set_isa_limit(isa);
      set_stream_prefetch(hint);
      std::vector<float> batch(static_cast<std::size_t>(rows) * out);
      matmul(x.data(), rows, m, nullptr, batch.data());
      for (int r = 0; r < rows; ++r) {
        std::vector<float> single(out);
        matmul(x.data() + static_cast<std::size_t>(r) * in, 1, m, nullptr, single.data());
        for (int o = 0; o < out; ++o) {
          ASSERT_EQ(single[o], batch[static_cast<std::size_t>(r) * out + o])
              << format_name(format) << " " << isa_name(isa) << " prefetch " << stream_prefetch_name(hint) << " row " << r
              << " col " << o;
          ASSERT_NEAR(single[o], scalar[static_cast<std::size_t>(r) * out + o], 1e-5f * (1 + std::fabs(single[o])))
              << format_name(format) << " " << isa_name(isa) << " row " << r << " col " << o;
        }
      }
    }
  }
}

// Prefill-sized batches (AMX takes 64 rows and more, in groups of rows whose activations fit the
// L2: with 4,864 inputs, 96 rows per group, so 110 rows are two groups, the second of 14 rows; the
// AVX-512 tiles of 4 rows end on a 2-row tile): each row as computed alone, bit for bit.
TEST(Matmul, ManyRowsOfLongInputsGiveTheBitsOfEachRowAlone) {
  IsaGuard guard;
  const int out = 40, in = 4864;
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 13, 0.05f);
  const auto bias = random_vector(out, 14);
  for (const int rows : {64, 70, 100, 110})
  for (WeightFormat format : {WeightFormat::Q8, WeightFormat::Q4}) {
    const auto x = random_vector(static_cast<std::size_t>(rows) * in, 15 + rows);
    const PackedMatrix m = PackedMatrix::from_f32(w.data(), out, in, format);
    for (Isa isa : runnable_isas()) {
      set_isa_limit(isa);
      std::vector<float> batch(static_cast<std::size_t>(rows) * out, NAN), single(out);
      matmul(x.data(), rows, m, bias.data(), batch.data());
      for (int r = 0; r < rows; ++r) {
        matmul(x.data() + static_cast<std::size_t>(r) * in, 1, m, bias.data(), single.data());
        ASSERT_EQ(std::memcmp(single.data(), batch.data() + static_cast<std::size_t>(r) * out, out * sizeof(float)), 0)
            << format_name(format) << " " << isa_name(isa) << " rows=" << rows << ": row " << r;
      }
    }
  }
}

// The accuracy each format costs against fp32 on the same weights: a sanity bound, the measured
// figures are in docs/speed.md.
TEST(Matmul, QuantizationErrorIsBoundedRelativeToFp32) {
  const int out = 256, in = 896, rows = 4;
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 21, 0.02f);
  const auto x = random_vector(static_cast<std::size_t>(rows) * in, 22);
  const PackedMatrix f32 = PackedMatrix::from_f32(w.data(), out, in, WeightFormat::F32);
  std::vector<float> exact(static_cast<std::size_t>(rows) * out);
  matmul_scalar(x.data(), rows, f32, nullptr, exact.data());
  double rms = 0;
  for (float v : exact) rms += static_cast<double>(v) * v;
  rms = std::sqrt(rms / exact.size());
  const std::pair<WeightFormat, double> bounds[] = {
      {WeightFormat::BF16, 0.01}, {WeightFormat::Q8, 0.02}, {WeightFormat::Q4, 0.2}};
  for (auto [format, bound] : bounds) {
    const PackedMatrix m = PackedMatrix::from_f32(w.data(), out, in, format);
    std::vector<float> y(exact.size());
    matmul(x.data(), rows, m, nullptr, y.data());
    double err = 0;
    for (std::size_t i = 0; i < y.size(); ++i) err += (y[i] - exact[i]) * static_cast<double>(y[i] - exact[i]);
    err = std::sqrt(err / y.size());
    EXPECT_LT(err / rms, bound) << format_name(format);
    EXPECT_GT(err, 0.0) << format_name(format) << " should round something";
  }
}

TEST(Matmul, BadArgumentsGetClearErrors) {
  const PackedMatrix m = PackedMatrix::from_f32(random_vector(32 * 16, 1).data(), 16, 32, WeightFormat::Q8);
  PreparedInput p;
  try {
    prepare_input(random_vector(31, 2).data(), 1, 31, m, p);
    FAIL();
  } catch (const inferlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("31"), std::string::npos);
  }
  std::vector<float> y(16);
  EXPECT_THROW(matmul(nullptr, 1, m, nullptr, y.data()), inferlab::Error);
  EXPECT_THROW(m.dequantize_row(16, y.data()), inferlab::Error);
  EXPECT_THROW(matmul(y.data(), 1, PackedMatrix(), nullptr, y.data()), inferlab::Error);
}

TEST(Dispatch, LimitSelectsTheFallbackAndReportsIt) {
  IsaGuard guard;
  set_isa_limit(Isa::Scalar);
  EXPECT_EQ(active_isa(), Isa::Scalar);
  EXPECT_NE(cpu_features_line().find("scalar"), std::string::npos);
  set_isa_limit(Isa::Amx);
  EXPECT_EQ(active_isa(), detected_isa());
  set_isa_limit(Isa::Avx2);
  EXPECT_LE(static_cast<int>(active_isa()), static_cast<int>(Isa::Avx2));
}

// The one-row prefetch hint: chosen by name (INFERLAB_PREFETCH's values), a clear error for any
// other, and named in the report line where AVX-512 runs.
TEST(Dispatch, PrefetchHintIsChosenByNameAndReported) {
  IsaGuard guard;
  EXPECT_EQ(parse_stream_prefetch("t0"), StreamPrefetch::T0);
  EXPECT_EQ(parse_stream_prefetch("nta"), StreamPrefetch::Nta);
  EXPECT_EQ(parse_stream_prefetch("nta-panels"), StreamPrefetch::NtaPanels);
  try {
    parse_stream_prefetch("t1");
    FAIL() << "t1 accepted";
  } catch (const inferlab::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected t0, nta or nta-panels"), std::string::npos) << e.what();
  }
  for (StreamPrefetch hint : {StreamPrefetch::T0, StreamPrefetch::Nta, StreamPrefetch::NtaPanels}) {
    set_stream_prefetch(hint);
    EXPECT_EQ(active_stream_prefetch(), hint);
    const bool named = cpu_features_line().find(std::string("one-row prefetch ") + stream_prefetch_name(hint)) != std::string::npos;
    EXPECT_EQ(named, active_isa() >= Isa::Avx2) << cpu_features_line();
  }
}

// Fusing q|k|v (or gate|up) after packing gives the matrix that packing the stacked rows gives.
TEST(Quantizers, ConcatRowsEqualsPackingTheStackedRows) {
  for (WeightFormat format : kFormats)
    for (int first_rows : {32, 37}) {  // whole panels (copied) and ragged (repacked)
      const int in = 70;
      const auto a = random_vector(static_cast<std::size_t>(first_rows) * in, 31, 0.1f);
      const auto b = random_vector(static_cast<std::size_t>(16) * in, 32, 0.1f);
      const auto c = random_vector(static_cast<std::size_t>(9) * in, 33, 0.1f);
      std::vector<float> stacked(a);
      stacked.insert(stacked.end(), b.begin(), b.end());
      stacked.insert(stacked.end(), c.begin(), c.end());
      const int out = first_rows + 16 + 9;
      const PackedMatrix pa = PackedMatrix::from_f32(a.data(), first_rows, in, format);
      const PackedMatrix pb = PackedMatrix::from_f32(b.data(), 16, in, format);
      const PackedMatrix pc = PackedMatrix::from_f32(c.data(), 9, in, format);
      const PackedMatrix fused = PackedMatrix::concat_rows({&pa, &pb, &pc});
      const PackedMatrix direct = PackedMatrix::from_f32(stacked.data(), out, in, format);
      ASSERT_EQ(fused.out(), out);
      std::vector<float> r1(in), r2(in);
      for (int r = 0; r < out; ++r) {
        fused.dequantize_row(r, r1.data());
        direct.dequantize_row(r, r2.data());
        ASSERT_EQ(r1, r2) << format_name(format) << " row " << r << " first part " << first_rows;
      }
      const auto x = random_vector(in * 3, 34);
      std::vector<float> y1(3 * out), y2(3 * out);
      matmul(x.data(), 3, fused, nullptr, y1.data());
      matmul(x.data(), 3, direct, nullptr, y2.data());
      ASSERT_EQ(y1, y2) << format_name(format);
    }
  const PackedMatrix q8 = PackedMatrix::from_f32(random_vector(16 * 32, 1).data(), 16, 32, WeightFormat::Q8);
  const PackedMatrix q4 = PackedMatrix::from_f32(random_vector(16 * 32, 1).data(), 16, 32, WeightFormat::Q4);
  // Different formats that take int8 activations fuse as a mixed matrix (each part in its panels,
  // every value and every output kept); with a float part, as rows of ggml blocks (Q8_0 | F32).
  // Different widths, or blocks of rows that are not whole 32-weight blocks, are refused.
  const PackedMatrix f32 = PackedMatrix::from_f32(random_vector(16 * 32, 2).data(), 16, 32, WeightFormat::F32);
  for (const PackedMatrix* second : {&q4, &f32}) {
    const PackedMatrix mixed = PackedMatrix::concat_rows({&q8, second});
    EXPECT_EQ(mixed.format(), second == &q4 ? WeightFormat::Mixed : WeightFormat::Blocks);
    std::vector<float> a(32), b(32);
    for (int r = 0; r < 32; ++r) {
      (r < 16 ? q8 : *second).dequantize_row(r % 16, a.data());
      mixed.dequantize_row(r, b.data());
      ASSERT_EQ(a, b) << format_name(mixed.format()) << " row " << r;
    }
  }
  const PackedMatrix wide = PackedMatrix::from_f32(random_vector(16 * 64, 1).data(), 16, 64, WeightFormat::Q4);
  EXPECT_THROW(PackedMatrix::concat_rows({&q8, &wide}), inferlab::Error);
  const PackedMatrix odd8 = PackedMatrix::from_f32(random_vector(16 * 40, 1).data(), 16, 40, WeightFormat::Q8);
  const PackedMatrix odd4 = PackedMatrix::from_f32(random_vector(16 * 40, 1).data(), 16, 40, WeightFormat::Q4);
  const PackedMatrix odd32 = PackedMatrix::from_f32(random_vector(16 * 40, 1).data(), 16, 40, WeightFormat::F32);
  EXPECT_EQ(PackedMatrix::concat_rows({&odd8, &odd4}).format(), WeightFormat::Mixed);
  EXPECT_THROW(PackedMatrix::concat_rows({&odd8, &odd32}), inferlab::Error);
}
