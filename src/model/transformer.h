// Shared building blocks of decoder-only transformers, and the Architecture record each
// src/model/arch/<name>.cpp fills in (config keys + HF tensor names -> these blocks).
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/kernels.h"
#include "inferlab/model/model.h"
#include "inferlab/loading/safetensors.h"

namespace inferlab {

enum class NormKind { LayerNorm, RMSNorm };
enum class MlpKind { GeluTanh, GeluErf, SwiGLU };
enum class PositionKind { Learned, Rope };

struct LayerWeights {
  std::vector<float> norm1_weight, norm1_bias, norm2_weight, norm2_bias;  // bias empty for RMSNorm
  LinearWeight qkv;   // fused [q | k | v] rows: one matmul per layer
  std::vector<float> q_norm, k_norm;  // Qwen3: RMSNorm of each q / k head before RoPE ([head_dim]); else empty
  LinearWeight out;   // attention output projection
  LinearWeight up;    // GELU: fc; SwiGLU: fused [gate | up] rows
  LinearWeight down;
};

struct TransformerWeights {
  NormKind norm = NormKind::RMSNorm;
  MlpKind mlp = MlpKind::SwiGLU;
  PositionKind positions = PositionKind::Rope;
  std::vector<float> inv_freq;  // RoPE: [head_dim / 2]
  std::shared_ptr<const std::vector<float>> embedding;  // [vocab][hidden], f32 weights
  std::shared_ptr<const fast::PackedMatrix> packed_embedding;  // instead, when weights are packed
  std::vector<float> position_embedding;                // Learned: [max_positions][hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm_weight, final_norm_bias;
  LinearWeight lm_head;
};

// Reads tensors by HF name with the shape config.json implies; Error names tensor, file, shapes.
class WeightLoader {
 public:
  // weights: LoadOptions::weights ("auto", "f32", "bf16", "int8", "q4"); output_weights: the output
  // projection's format as output_weights_of() resolves it.
  explicit WeightLoader(const TensorSource& source, std::string weights = "auto", std::string output_weights = "auto")
      : source_(source), weights_(std::move(weights)), output_weights_(std::move(output_weights)) {}
  bool has(const std::string& name) const { return source_.find(name).has_value(); }
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // nn.Linear weight stored [out][in]; bias_name empty: no bias.
  LinearWeight linear(const std::string& weight_name, int out, int in, const std::string& bias_name = "") const;
  // GPT-2 Conv1D weight stored [in][out]: transposed to [out][in] here.
  LinearWeight conv1d(const std::string& weight_name, int in, int out, const std::string& bias_name = "") const;
  // The untied output projection lm_head [vocab][hidden], packed in the output format.
  LinearWeight output(const std::string& weight_name, int vocab, int hidden) const;
  // The token embedding [vocab][hidden] into t.embedding, or t.packed_embedding when packing; when
  // tied to the output projection it is packed in the output format, being that matrix too, and a
  // checkpoint that stores the one tied matrix under the output's name (tied_name, e.g.
  // "lm_head.weight": some exporters keep that name of the shared pair) is read from there.
  void embedding(const std::string& name, int vocab, int hidden, TransformerWeights& t, bool tied_output,
                 const std::string& tied_name = "lm_head.weight") const;

 private:
  LinearWeight linear_as(const std::string& option, const std::string& weight_name, int out, int in,
                         const std::string& bias_name) const;

  const TensorSource& source_;
  std::string weights_;
  std::string output_weights_;
};

// Row-wise concatenation of layers with the same input width.
LinearWeight fuse_rows(const std::vector<LinearWeight>& parts);
LinearWeight tied_head(const TransformerWeights& t, int vocab, int hidden);

// HF's default RoPE inverse frequencies, with the rope_scaling types we support applied.
std::vector<float> rope_inv_freq(int head_dim, double theta, const nlohmann::json& rope_scaling, const std::string& where);

enum class Init { Normal, Ones, Zeros };
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::Normal;
};

struct Architecture {
  std::string name;                     // ModelConfig::architecture
  std::vector<std::string> model_types; // config.json "model_type"
  std::vector<std::string> classes;     // config.json "architectures"
  ModelConfig (*parse_config)(const nlohmann::json& config, const std::string& where);
  TransformerWeights (*load_weights)(const ModelConfig& config, const nlohmann::json& raw, const TensorSource& source,
                                     const LoadOptions& options);
  // Every tensor of an HF checkpoint of this config, for make-model.
  std::vector<TensorSpec> (*tensor_layout)(const ModelConfig& config, const nlohmann::json& raw);
};

const Architecture& gpt2_architecture();
const Architecture& qwen2_architecture();
const Architecture& llama_architecture();
const Architecture& qwen3_architecture();
const Architecture& mistral_architecture();

// By model_type, else by architectures[]; Error listing what is supported.
const Architecture& find_architecture(const nlohmann::json& config, const std::string& where);

// Llama-family pieces shared by llama.cpp, qwen2.cpp, qwen3.cpp and mistral.cpp (they differ in
// biases, q/k norms and defaults).
struct LlamaStyle {
  bool qkv_bias = false, out_bias = false, mlp_bias = false;
  bool qk_norm = false;  // self_attn.q_norm / k_norm weights (Qwen3)
};
ModelConfig parse_llama_style_config(const nlohmann::json& config, const std::string& where, const std::string& arch,
                                     bool tie_default);
TransformerWeights load_llama_style(const ModelConfig& config, const nlohmann::json& raw, const TensorSource& source,
                                    const LlamaStyle& style, const LoadOptions& options);
std::vector<TensorSpec> llama_style_layout(const ModelConfig& config, const LlamaStyle& style);

class TransformerModel : public Model {
 public:
  TransformerModel(ModelConfig config, TransformerWeights weights, std::filesystem::path path);
  const ModelConfig& config() const override { return config_; }
  const std::filesystem::path& path() const override { return path_; }
  void forward_into(std::span<const BatchEntry> batch, KVCache& cache, std::vector<float>& logits) override;
  std::size_t decode_weight_bytes() const override;
  std::string weight_formats() const override;

 private:
  std::map<std::string, std::size_t> weight_bytes_by_format() const;
  ModelConfig config_;
  TransformerWeights w_;
  std::filesystem::path path_;
};

}  // namespace inferlab
