// The mixture-of-experts operations of the backend: route_top_k (softmax, top-k, renormalised or
// not) and expert_swiglu (rows grouped by expert) against a per-row reference, in every load format
// and in gpt-oss's MXFP4; and the Qwen3-MoE settings the engine does not run, refused naming the key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/backend/backend.h"
#include "inferlab/model/config.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/util/error.h"

using namespace inferlab;

namespace {

constexpr int kHidden = 64, kInter = 32, kExperts = 5, kRows = 7, kPerRow = 2;

std::vector<float> random_values(std::size_t n, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// values [rows][cols] in GGUF's MXFP4 blocks, quantized as the format defines it: per 32 values the
// power of two 2^(e - 127) that brings the largest |value| to 6 or less, each value the nearest e2m1
// code (0, 0.5, 1, 1.5, 2, 3, 4, 6; sign bit 3), weight j in byte j's low nibble and j + 16 in its high.
std::vector<uint8_t> mxfp4_rows(const std::vector<float>& values, int rows, int cols) {
  constexpr double kMagnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  std::vector<uint8_t> bytes(static_cast<std::size_t>(rows) * cols / 32 * 17, 0);
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < cols / 32; ++b) {
      const float* v = values.data() + static_cast<std::size_t>(r) * cols + b * 32;
      double largest = 0;
      for (int k = 0; k < 32; ++k) largest = std::max(largest, std::fabs(static_cast<double>(v[k])));
      const int e = largest > 0 ? std::clamp(static_cast<int>(std::ceil(std::log2(largest / 6))), -127, 127) : -127;
      uint8_t* block = bytes.data() + (static_cast<std::size_t>(r) * (cols / 32) + b) * 17;
      block[0] = static_cast<uint8_t>(e + 127);
      for (int k = 0; k < 32; ++k) {
        const double scaled = std::ldexp(static_cast<double>(v[k]), -e);
        int code = 0;
        for (int c = 1; c < 8; ++c)
          if (std::fabs(std::fabs(scaled) - kMagnitudes[c]) < std::fabs(std::fabs(scaled) - kMagnitudes[code])) code = c;
        if (scaled < 0) code |= 8;
        block[1 + k % 16] = static_cast<uint8_t>(block[1 + k % 16] | (code << (k < 16 ? 0 : 4)));
      }
    }
  return bytes;
}

// "mxfp4": the values as a GGUF MXFP4 tensor, which the backend keeps in the mxfp4 panels.
MatrixPtr matrix_of(Backend& backend, const std::vector<float>& values, int rows, int cols, const std::string& format) {
  if (format == "mxfp4") {
    const std::vector<uint8_t> bytes = mxfp4_rows(values, rows, cols);
    TensorView view{DType::U8, {rows, cols}, bytes.data(), bytes.size(), "an MXFP4 test matrix"};
    view.ggml_type = static_cast<int>(fast::kGgmlMXFP4);
    MatrixPtr m = backend.matrix(view, rows, cols, "auto");
    if (m->format() != "mxfp4") fail("MXFP4 blocks were held as {}, not in the mxfp4 panels", m->format());
    return m;
  }
  TensorView view;
  view.dtype = DType::F32;
  view.shape = {rows, cols};
  view.data = values.data();
  view.bytes = values.size() * sizeof(float);
  return backend.matrix(view, rows, cols, format);
}

struct ExpertValues {
  std::vector<float> gate_up, down;  // [2 * inter][hidden] (gate rows, then up rows), [hidden][inter]
};

struct Fixture {
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
  std::vector<ExpertValues> values;
  std::vector<ExpertWeights> experts;
  Activations x;

  explicit Fixture(const std::string& format) {
    for (int e = 0; e < kExperts; ++e) {
      ExpertValues v{random_values(2 * kInter * kHidden, 100 + e, 0.2f), random_values(kHidden * kInter, 200 + e, 0.2f)};
      ExpertWeights w;
      w.gate_up = {matrix_of(*backend, v.gate_up, 2 * kInter, kHidden, format), {}, kHidden, 2 * kInter};
      w.down = {matrix_of(*backend, v.down, kHidden, kInter, format), {}, kInter, kHidden};
      values.push_back(std::move(v));
      experts.push_back(std::move(w));
    }
    backend->resize(x, kRows, kHidden);
    const auto input = random_values(kRows * kHidden, 7, 1.0f);
    std::copy(input.begin(), input.end(), x.data);
  }

  // Expert 0 chosen by every row, expert 4 by none; rows list their experts in either order.
  static ExpertChoice choice() {
    ExpertChoice c;
    c.per_row = kPerRow;
    c.expert = {0, 1, 2, 0, 0, 3, 1, 0, 0, 2, 3, 0, 0, 1};
    c.weight = {0.7f, 0.3f, 0.55f, 0.45f, 0.9f, 0.1f, 0.25f, 0.75f, 0.5f, 0.5f, 1.2f, -0.2f, 0.6f, 0.4f};
    return c;
  }

  // Row by row through the backend's own matmuls: one expert on one row at a time.
  std::vector<float> per_row_reference(const ExpertChoice& c) {
    std::vector<float> out(kRows * kHidden, 0.0f);
    Activations one, gate_up, act, y;
    for (int r = 0; r < kRows; ++r) {
      backend->select_rows(x, std::vector<int>{r}, one);
      for (int j = 0; j < kPerRow; ++j) {
        const ExpertWeights& e = experts[c.expert[r * kPerRow + j]];
        backend->linear(one, e.gate_up, gate_up);
        backend->swiglu(gate_up, act);
        backend->linear(act, e.down, y);
        for (int i = 0; i < kHidden; ++i) out[r * kHidden + i] += c.weight[r * kPerRow + j] * y.data[i];
      }
    }
    return out;
  }

  // The SwiGLU written out in double precision from the f32 weights themselves.
  std::vector<double> exact_reference(const ExpertChoice& c) const {
    std::vector<double> out(kRows * kHidden, 0.0);
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < kPerRow; ++j) {
        const ExpertValues& v = values[c.expert[r * kPerRow + j]];
        std::vector<double> act(kInter);
        for (int i = 0; i < kInter; ++i) {
          double gate = 0, up = 0;
          for (int h = 0; h < kHidden; ++h) {
            gate += double(v.gate_up[i * kHidden + h]) * x.data[r * kHidden + h];
            up += double(v.gate_up[(kInter + i) * kHidden + h]) * x.data[r * kHidden + h];
          }
          act[i] = gate / (1.0 + std::exp(-gate)) * up;
        }
        for (int h = 0; h < kHidden; ++h) {
          double y = 0;
          for (int i = 0; i < kInter; ++i) y += double(v.down[h * kInter + i]) * act[i];
          out[r * kHidden + h] += c.weight[r * kPerRow + j] * y;
        }
      }
    return out;
  }
};

float largest_magnitude(std::span<const float> v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

class ExpertFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertFormats, GroupedEqualsEachRowAlone) {
  Fixture f(GetParam());
  const ExpertChoice c = Fixture::choice();
  Activations grouped;
  f.backend->expert_swiglu(f.x, f.experts, c, grouped);
  ASSERT_EQ(grouped.rows, kRows);
  ASSERT_EQ(grouped.cols, kHidden);
  const std::vector<float> reference = f.per_row_reference(c);
  const float scale = largest_magnitude(reference);
  ASSERT_GT(scale, 0.1f);
  for (int i = 0; i < kRows * kHidden; ++i)
    ASSERT_NEAR(grouped.data[i], reference[i], 2e-5f * scale) << GetParam() << " element " << i;
}

INSTANTIATE_TEST_SUITE_P(Moe, ExpertFormats, ::testing::Values("f32", "bf16", "int8", "q4", "mxfp4"));

TEST(ExpertSwiglu, F32MatchesTheSwigluWrittenOut) {
  Fixture f("f32");
  const ExpertChoice c = Fixture::choice();
  Activations grouped;
  f.backend->expert_swiglu(f.x, f.experts, c, grouped);
  const std::vector<double> exact = f.exact_reference(c);
  for (int i = 0; i < kRows * kHidden; ++i) ASSERT_NEAR(grouped.data[i], exact[i], 1e-4) << "element " << i;
}

TEST(ExpertSwiglu, AnExpertNoRowChoseIsNeverRead) {
  Fixture f("f32");
  const ExpertChoice c = Fixture::choice();
  Activations before, after;
  f.backend->expert_swiglu(f.x, f.experts, c, before);
  const std::vector<float> first(before.data, before.data + kRows * kHidden);
  // Expert 4 (chosen by no row) replaced by a matrix of another width: reading it would fail.
  f.experts[4].gate_up = {matrix_of(*f.backend, std::vector<float>(6 * 8, 1.0f), 6, 8, "f32"), {}, 8, 6};
  f.backend->expert_swiglu(f.x, f.experts, c, after);
  EXPECT_EQ(first, std::vector<float>(after.data, after.data + kRows * kHidden));
  ExpertChoice uses_it = c;
  uses_it.expert[3] = 4;
  EXPECT_THROW(f.backend->expert_swiglu(f.x, f.experts, uses_it, after), Error);
}

TEST(ExpertSwiglu, RefusesAChoiceThatDoesNotFit) {
  Fixture f("f32");
  ExpertChoice c = Fixture::choice();
  Activations out;
  c.expert[0] = kExperts;
  EXPECT_THROW(f.backend->expert_swiglu(f.x, f.experts, c, out), Error);
  c = Fixture::choice();
  c.expert.resize(c.expert.size() - kPerRow);
  c.weight.resize(c.weight.size() - kPerRow);
  EXPECT_THROW(f.backend->expert_swiglu(f.x, f.experts, c, out), Error);
}

TEST(RouteTopK, SoftmaxTopKRenormalisedOrNot) {
  auto backend = make_cpu_backend(1);
  Activations logits;
  backend->resize(logits, 2, 4);
  const float values[] = {1.0f, 3.0f, 2.0f, 0.5f,   // experts 1, 2
                          0.0f, 2.0f, 0.0f, 2.0f};  // a tie between 1 and 3: the lower first
  std::copy(std::begin(values), std::end(values), logits.data);
  ExpertChoice normalised, raw;
  backend->route_top_k(logits, 2, true, normalised);
  backend->route_top_k(logits, 2, false, raw);
  EXPECT_EQ(normalised.expert, (std::vector<int>{1, 2, 1, 3}));
  EXPECT_EQ(raw.expert, normalised.expert);
  const double sum0 = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + std::exp(0.5);
  EXPECT_NEAR(raw.weight[0], std::exp(3.0) / sum0, 1e-6);
  EXPECT_NEAR(raw.weight[1], std::exp(2.0) / sum0, 1e-6);
  EXPECT_NEAR(normalised.weight[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(normalised.weight[1], std::exp(2.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(normalised.weight[2], 0.5, 1e-6);
  EXPECT_NEAR(normalised.weight[3], 0.5, 1e-6);
  EXPECT_THROW(backend->route_top_k(logits, 5, true, raw), Error);
  EXPECT_THROW(backend->route_top_k(logits, 0, true, raw), Error);
}

// The error read_model_config gives for a tiny Qwen3-MoE (or gpt-oss) config.json with `change` applied.
std::string config_error(const nlohmann::json& change, const std::string& model_type = "qwen3_moe") {
  nlohmann::json config = {{"model_type", model_type},      {"hidden_size", 32},          {"num_hidden_layers", 2},
                           {"num_attention_heads", 4},       {"num_key_value_heads", 2},   {"intermediate_size", 48},
                           {"vocab_size", 64},               {"max_position_embeddings", 64}};
  if (model_type == "qwen3_moe")
    config.update({{"moe_intermediate_size", 16}, {"num_experts", 4}, {"num_experts_per_tok", 2}});
  else
    config.update({{"num_local_experts", 4}, {"num_experts_per_tok", 2}, {"head_dim", 8}, {"sliding_window", 8}});
  for (const auto& [key, value] : change.items())  // a null value removes the key
    if (value.is_null()) config.erase(key);
    else config[key] = value;
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_moe_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  std::string error = "(no error)";
  try {
    read_model_config(dir.string());
  } catch (const Error& e) {
    error = e.what();
  }
  std::filesystem::remove_all(dir);
  return error;
}

TEST(Qwen3MoeConfig, SettingsTheEngineDoesNotRunAreRefusedByName) {
  EXPECT_EQ(config_error(nlohmann::json::object()), "(no error)");
  EXPECT_EQ(config_error({{"num_experts", nullptr}, {"num_local_experts", 4}}), "(no error)");  // transformers 5's name
  // YaRN runs since the long-context work (its attention factor applied as for the dense models).
  EXPECT_EQ(config_error({{"rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}}}}), "(no error)");
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"decoder_sparse_step", 0}}, "key \"decoder_sparse_step\" = 0 is out of range"},
      {{{"num_experts", 0}}, "key \"num_experts\" = 0 is out of range"},
      {{{"mlp_only_layers", {0, 2}}}, "mlp_only_layers entry 2 is not a layer index 0..1"},
      {{{"mlp_only_layers", "all"}}, "mlp_only_layers must be a list of layer indices"},
      {{{"num_experts_per_tok", 5}}, "num_experts_per_tok 5 is outside 1..num_experts (4)"},
      {{{"num_local_experts", 8}}, "num_experts 4 and num_local_experts 8 disagree"},
      {{{"use_sliding_window", true}}, "use_sliding_window true is not supported for qwen3_moe"},
      {{{"rope_parameters", {{"rope_type", "su"}, {"factor", 4.0}}}}, "rope_scaling type 'su' is not supported"},
  };
  for (const auto& [change, message] : cases) {
    const std::string error = config_error(change);
    EXPECT_NE(error.find(message), std::string::npos) << change.dump() << ": " << error;
  }
}

}  // namespace

namespace {

// gpt-oss's expert written out in double precision: gate_up and down with their biases, the gate
// clamped to at most limit, up to [-limit, limit], (up + 1) * gate * sigmoid(alpha * gate).
std::vector<double> clamped_reference(const Fixture& f, const ExpertChoice& c, float alpha, float limit) {
  std::vector<double> out(kRows * kHidden, 0.0);
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kPerRow; ++j) {
      const int e = c.expert[r * kPerRow + j];
      const ExpertValues& v = f.values[e];
      const ExpertWeights& w = f.experts[e];
      std::vector<double> act(kInter);
      for (int i = 0; i < kInter; ++i) {
        double gate = w.gate_up.bias[i], up = w.gate_up.bias[kInter + i];
        for (int h = 0; h < kHidden; ++h) {
          gate += double(v.gate_up[i * kHidden + h]) * f.x.data[r * kHidden + h];
          up += double(v.gate_up[(kInter + i) * kHidden + h]) * f.x.data[r * kHidden + h];
        }
        gate = std::min<double>(gate, limit);
        up = std::clamp<double>(up, -limit, limit);
        act[i] = (up + 1) * gate / (1.0 + std::exp(-alpha * gate));
      }
      for (int h = 0; h < kHidden; ++h) {
        double y = w.down.bias[h];
        for (int i = 0; i < kInter; ++i) y += double(v.down[h * kInter + i]) * act[i];
        out[r * kHidden + h] += c.weight[r * kPerRow + j] * y;
      }
    }
  return out;
}

}  // namespace

// The clamped SwiGLU (gpt-oss) with biases on both matrices, a limit the pre-activations pass on
// both sides: grouped by expert against the definition written out.
TEST(ExpertSwiglu, ClampedSwigluWithBiasesMatchesItsDefinition) {
  Fixture f("f32");
  const float alpha = 1.702f, limit = 1.0f;
  for (int e = 0; e < kExperts; ++e) {
    ExpertWeights& w = f.experts[e];
    w.gate_up.bias = random_values(2 * kInter, 300 + e, 0.5f);
    w.down.bias = random_values(kHidden, 400 + e, 0.5f);
    w.activation = {ExpertActivation::Kind::ClampedSwiGLU, alpha, limit};
  }
  const ExpertChoice c = Fixture::choice();
  Activations grouped;
  f.backend->expert_swiglu(f.x, f.experts, c, grouped);
  const std::vector<double> exact = clamped_reference(f, c, alpha, limit);
  for (int i = 0; i < kRows * kHidden; ++i) ASSERT_NEAR(grouped.data[i], exact[i], 1e-4) << "element " << i;
  // Both clamps act on this input: without them the result differs.
  const std::vector<double> unclamped = clamped_reference(f, c, alpha, 1e9f);
  double moved = 0;
  for (int i = 0; i < kRows * kHidden; ++i) moved = std::max(moved, std::abs(exact[i] - unclamped[i]));
  EXPECT_GT(moved, 0.1);
}

// gpt-oss: GptOssConfig's defaults fill what the Hub's config.json leaves out (layer_types, RoPE);
// what the forward does not run is refused naming the key and value.
TEST(GptOssConfig, SettingsTheEngineDoesNotRunAreRefusedByName) {
  EXPECT_EQ(config_error(nlohmann::json::object(), "gpt_oss"), "(no error)");
  EXPECT_EQ(config_error({{"layer_types", {"full_attention", "sliding_attention"}}}, "gpt_oss"), "(no error)");
  EXPECT_EQ(config_error({{"quantization_config", {{"quant_method", "mxfp4"}}}}, "gpt_oss"), "(no error)");
  EXPECT_EQ(config_error({{"sliding_window", nullptr}}, "gpt_oss"), "(no error)");  // absent: GptOssConfig's 128
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"quantization_config", {{"quant_method", "bitsandbytes"}}}}, "quantization_config.quant_method 'bitsandbytes' is not supported"},
      {{{"layer_types", {"full_attention"}}}, "layer_types must be a list of num_hidden_layers (2) entries"},
      {{{"layer_types", {"full_attention", "chunked_attention"}}}, "layer_types[1] 'chunked_attention' is not supported"},
      {{{"num_experts_per_tok", 5}}, "num_experts_per_tok 5 is more than num_local_experts (4)"},
      {{{"num_local_experts", 0}}, "key \"num_local_experts\" = 0 is out of range"},
      {{{"swiglu_limit", -1.0}}, "swiglu_limit -1 must be > 0"},
      {{{"rope_parameters", {{"rope_type", "su"}, {"factor", 4.0}}}}, "rope_scaling type 'su' is not supported"},
  };
  for (const auto& [change, message] : cases) {
    const std::string error = config_error(change, "gpt_oss");
    EXPECT_NE(error.find(message), std::string::npos) << change.dump() << ": " << error;
  }
}
