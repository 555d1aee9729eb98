// bench/hf_to_gguf.py's output read back with inferlab's own GGUF reader and compared with the
// safetensors it came from: metadata llama.cpp needs, tensor names/shapes/types, and the data
// (BF16 bit-exact; Q8_0/Q4_0 blocks checked against ggml's reference rules, element by element).
// The files are written by the peer_gguf_convert test (fixture); paths come from the environment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/tensor/float16.h"
#include "inferlab/loading/gguf.h"
#include "inferlab/loading/safetensors.h"

namespace fs = std::filesystem;
using namespace inferlab;

namespace {

constexpr uint32_t kF32 = 0, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30;

fs::path models_dir() {
  const char* dir = std::getenv("PEER_GGUF_DIR");
  return dir ? fs::path(dir) : fs::path();
}

std::vector<uint8_t> read_bytes(const fs::path& file, uint64_t offset, uint64_t size) {
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<uint8_t> out(size);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size));
  EXPECT_TRUE(in) << "short read in " << file;
  return out;
}

uint64_t tensor_size(uint32_t type, uint64_t count) {
  switch (type) {
    case kF32: return count * 4;
    case kBF16: return count * 2;
    case kQ8_0: return count / 32 * 34;
    case kQ4_0: return count / 32 * 18;
  }
  ADD_FAILURE() << "unexpected ggml type " << type;
  return 0;
}

std::string hf_name(const std::string& gguf_name) {
  static const std::map<std::string, std::string> layer_parts = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"}, {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.weight", "self_attn.k_proj.weight"}, {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.weight", "self_attn.v_proj.weight"}, {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"}, {"ffn_down.weight", "mlp.down_proj.weight"}};
  if (gguf_name == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf_name == "output_norm.weight") return "model.norm.weight";
  if (gguf_name == "output.weight") return "lm_head.weight";
  const auto dot = gguf_name.find('.', 4);
  const std::string layer = gguf_name.substr(4, dot - 4), part = gguf_name.substr(dot + 1);
  return "model.layers." + layer + "." + layer_parts.at(part);
}

// Every block: the fp16 scale is ggml's (amax/127 for q8_0, signed max/-8 for q4_0) and each value
// dequantizes to within half a step of the original (the rounding the quantizers do).
void check_blocks(uint32_t type, const std::vector<uint8_t>& data, const std::vector<float>& original, const std::string& name) {
  const std::size_t blocks = original.size() / 32, block_bytes = type == kQ8_0 ? 34 : 18;
  int bad = 0;
  for (std::size_t b = 0; b < blocks && bad < 5; ++b) {
    const uint8_t* block = data.data() + b * block_bytes;
    uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const float d = f16_to_f32(scale_bits);
    const float* x = original.data() + b * 32;
    float amax = 0, signed_max = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), signed_max = x[j];
    const float expected_d = type == kQ8_0 ? amax / 127.0f : signed_max / -8.0f;
    if (scale_bits != f32_to_f16(expected_d)) {
      ADD_FAILURE() << name << " block " << b << ": scale " << d << ", expected " << expected_d;
      ++bad;
      continue;
    }
    const float exact_d = expected_d;  // the quantizers divide by the fp32 scale, not the fp16 one
    for (int j = 0; j < 32; ++j) {
      const int q = type == kQ8_0 ? static_cast<int8_t>(block[2 + j])
                                  : (j < 16 ? (block[2 + j] & 15) : (block[2 + j - 16] >> 4)) - 8;
      const float step_error = exact_d == 0 ? 0 : std::fabs(x[j] / exact_d - static_cast<float>(q));
      if (step_error > 0.5001f && !(type == kQ4_0 && q == 7 && x[j] / exact_d > 7)) {  // q4_0 clamps +8 to 7
        ADD_FAILURE() << name << " block " << b << " element " << j << ": q " << q << " for x/d " << x[j] / exact_d;
        ++bad;
      }
    }
  }
}

struct Case {
  std::string model;  // folder under PEER_GGUF_DIR
  std::string type;   // bf16, q8_0, q4_0
};

class ConvertedGguf : public ::testing::TestWithParam<Case> {};

TEST_P(ConvertedGguf, MatchesTheCheckpoint) {
  if (models_dir().empty()) GTEST_SKIP() << "PEER_GGUF_DIR not set (run through ctest: the peer_gguf_convert fixture writes the files)";
  const Case c = GetParam();
  const fs::path folder = models_dir() / c.model, file = folder / (c.type + ".gguf");
  ASSERT_TRUE(fs::exists(file)) << file << " missing: peer_gguf_convert did not run";
  const GgufFile gguf = read_gguf(file);
  EXPECT_EQ(gguf.version, 3u);

  nlohmann::json config;
  std::ifstream(folder / "config.json") >> config;
  const auto meta = [&](const std::string& key) -> nlohmann::json {
    const nlohmann::json* v = gguf.find(key);
    if (!v) ADD_FAILURE() << "metadata " << key << " missing";
    return v ? *v : nlohmann::json();
  };
  EXPECT_EQ(meta("general.architecture"), "qwen2");
  EXPECT_EQ(meta("qwen2.block_count"), config["num_hidden_layers"]);
  EXPECT_EQ(meta("qwen2.embedding_length"), config["hidden_size"]);
  EXPECT_EQ(meta("qwen2.feed_forward_length"), config["intermediate_size"]);
  EXPECT_EQ(meta("qwen2.attention.head_count"), config["num_attention_heads"]);
  EXPECT_EQ(meta("qwen2.attention.head_count_kv"), config["num_key_value_heads"]);
  EXPECT_EQ(meta("qwen2.context_length"), config["max_position_embeddings"]);
  EXPECT_FLOAT_EQ(meta("qwen2.rope.freq_base").get<float>(), config["rope_theta"].get<float>());
  EXPECT_FLOAT_EQ(meta("qwen2.attention.layer_norm_rms_epsilon").get<float>(), config["rms_norm_eps"].get<float>());
  EXPECT_EQ(meta("general.file_type"), c.type == "bf16" ? 32 : c.type == "q8_0" ? 7 : 2);
  EXPECT_EQ(meta("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(meta("tokenizer.ggml.pre"), "qwen2");
  const int vocab = config["vocab_size"];
  EXPECT_EQ(meta("tokenizer.ggml.tokens").size(), static_cast<std::size_t>(vocab));
  EXPECT_EQ(meta("tokenizer.ggml.token_type").size(), static_cast<std::size_t>(vocab));
  EXPECT_GT(meta("tokenizer.ggml.merges").size(), 100000u);
  EXPECT_EQ(meta("tokenizer.ggml.eos_token_id"), 151645);
  EXPECT_EQ(meta("tokenizer.ggml.tokens")[151644], "<|im_start|>");
  EXPECT_EQ(meta("tokenizer.ggml.token_type")[151644], 3);  // CONTROL
  EXPECT_EQ(meta("tokenizer.ggml.token_type")[vocab - 1], 5);  // UNUSED padding entry

  const auto source = open_safetensors_folder(folder);
  const bool tied = !source->find("lm_head.weight").has_value();
  const int layers = config["num_hidden_layers"];
  EXPECT_EQ(gguf.tensors.size(), static_cast<std::size_t>(2 + 12 * layers + (tied ? 0 : 1)));
  uint64_t expected_offset = 0;
  for (const GgufTensorInfo& t : gguf.tensors) {
    SCOPED_TRACE(t.name);
    const TensorView view = source->require(hf_name(t.name));
    // GGUF dims run innermost first: the reverse of the PyTorch shape.
    std::vector<int64_t> reversed(view.shape.rbegin(), view.shape.rend());
    ASSERT_EQ(std::vector<int64_t>(t.dims.begin(), t.dims.end()), reversed);
    const bool is_matrix = view.shape.size() == 2;
    const bool output_matrix = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
    const uint32_t expected_type = !is_matrix ? kF32
                                   : c.type == "bf16" ? kBF16
                                   : c.type == "q8_0" || output_matrix ? kQ8_0  // llama-quantize's Q6_K -> Q8_0 fallback
                                                                       : kQ4_0;
    ASSERT_EQ(t.type, expected_type);
    EXPECT_EQ(t.offset, expected_offset);
    EXPECT_EQ(t.offset % gguf.alignment, 0u);
    const uint64_t size = tensor_size(t.type, static_cast<uint64_t>(view.numel()));
    expected_offset += (size + gguf.alignment - 1) / gguf.alignment * gguf.alignment;
    const std::vector<uint8_t> data = read_bytes(file, gguf.data_offset + t.offset, size);
    const std::vector<float> original = view.to_f32();
    if (t.type == kBF16) {
      ASSERT_EQ(view.dtype, DType::BF16);
      EXPECT_EQ(std::memcmp(data.data(), view.data, size), 0) << "BF16 data differs from the checkpoint";
    } else if (t.type == kF32) {
      EXPECT_EQ(std::memcmp(data.data(), original.data(), size), 0) << "F32 data differs from the checkpoint";
    } else {
      check_blocks(t.type, data, original, t.name);
    }
  }
  EXPECT_EQ(gguf.data_offset + expected_offset, fs::file_size(file)) << "file size does not match the tensor directory";
}

INSTANTIATE_TEST_SUITE_P(Peer, ConvertedGguf,
                         ::testing::Values(Case{"tied", "bf16"}, Case{"tied", "q8_0"}, Case{"tied", "q4_0"},
                                           Case{"untied", "bf16"}, Case{"untied", "q8_0"}, Case{"untied", "q4_0"}),
                         [](const auto& info) { return info.param.model + "_" + info.param.type; });

}  // namespace
