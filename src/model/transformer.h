// A transformer (decoder-only, or an encoder such as BERT): its weight slots, the WeightLoader that fills them through a backend,
// and the Architecture record each src/model/arch/<name>.cpp fills in (config keys, HF tensor
// names into the slots, the layout, the forward graph).
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inferlab/backend/backend.h"
#include "inferlab/model/model.h"
#include "inferlab/loading/safetensors.h"

namespace inferlab {

// The weights of a decoder-only transformer, as slots the graphs of src/model/arch/ read (llama.cpp's
// llama_layer): an architecture fills those it has and leaves the others empty.
struct LayerWeights {
  std::vector<float> norm1_weight, norm1_bias, norm2_weight, norm2_bias;  // bias empty for RMSNorm
  Linear qkv;   // fused [q | k | v] rows: one matmul per layer
  std::vector<float> q_norm, k_norm;  // Qwen3: RMSNorm of each q / k head before RoPE ([head_dim]); else empty
  std::vector<float> attention_sinks;  // gpt-oss: a softmax-denominator logit per query head ([heads]); else empty
  Linear out;   // attention output projection
  Linear up;    // GELU: fc; SwiGLU: fused [gate | up] rows
  Linear down;
  // Mixture of experts (Qwen3-MoE) in place of up / down: the router [experts][hidden] (kept f32:
  // a top-k choice flips on small errors), each expert's SwiGLU, how many experts a token uses and
  // whether their weights are renormalised to sum 1. experts empty: a dense MLP.
  Linear router;
  std::vector<ExpertWeights> experts;
  int experts_per_token = 0;
  bool normalize_expert_weights = false;
};

struct TransformerWeights {
  std::vector<float> inv_freq;   // RoPE: [head_dim / 2]
  float rope_attention_factor = 1.0f;  // RopeScaling::attention_factor (YaRN), applied to cos / sin
  int rope_position_limit = 0;         // RopeScaling::position_limit (dynamic): > 0 refuses positions from there
  MatrixPtr embedding;           // [vocab][hidden]
  MatrixPtr position_embedding;  // learned positions (GPT-2): [max_positions][hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm_weight, final_norm_bias;
  Linear lm_head;                // tied: shares the embedding's matrix
  bool gelu_erf = false;         // GPT-2's "activation_function": "gelu" (exact), else gelu_new (tanh)
  std::vector<float> embedding_norm_weight, embedding_norm_bias;  // BERT: LayerNorm of the embeddings
};

// Reads tensors by HF name with the shape config.json implies; Error names tensor, file, shapes.
class WeightLoader {
 public:
  // The backend prepares each matrix in the format options ask (LoadOptions::weights, and the
  // output projection's as output_weights_of() resolves it).
  WeightLoader(const TensorSource& source, Backend& backend, const LoadOptions& options)
      : source_(source), backend_(backend), weights_(options.weights), output_weights_(output_weights_of(options)) {}
  bool has(const std::string& name) const { return source_.find(name).has_value(); }
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // nn.Linear weight stored [out][in]; bias_name empty: no bias.
  Linear linear(const std::string& weight_name, int out, int in, const std::string& bias_name = "") const;
  // GPT-2 Conv1D weight stored [in][out]: transposed to [out][in] here.
  Linear conv1d(const std::string& weight_name, int in, int out, const std::string& bias_name = "") const;
  // The untied output projection lm_head [vocab][hidden], packed in the output format.
  Linear output(const std::string& weight_name, int vocab, int hidden) const;
  // A table read by row (learned position embeddings), kept f32.
  MatrixPtr table(const std::string& name, int rows, int cols) const;
  // Row-wise concatenation of layers with the same input width (fused q|k|v, gate|up); a part
  // without a bias gets zeros when another has one.
  Linear fuse_rows(const std::vector<Linear>& parts) const;
  // The token embedding [vocab][hidden] into t.embedding; when
  // tied to the output projection it is packed in the output format, being that matrix too, and a
  // checkpoint that stores the one tied matrix under the output's name (tied_name, e.g.
  // "lm_head.weight": some exporters keep that name of the shared pair) is read from there.
  void embedding(const std::string& name, int vocab, int hidden, TransformerWeights& t, bool tied_output,
                 const std::string& tied_name = "lm_head.weight") const;

 private:
  Linear linear_as(const std::string& option, const std::string& weight_name, int out, int in, const std::string& bias_name,
                   bool transposed) const;

  const TensorSource& source_;
  Backend& backend_;
  std::string weights_;
  std::string output_weights_;
};

Linear tied_head(const TransformerWeights& t, int vocab, int hidden);

// `rows` x `cols` weights held in `bytes` as rows of GGUF's MXFP4 blocks (a scale byte, then 16 bytes
// of e2m1 codes: weight j in byte j's low nibble, weight j + 16 in its high one): a view that the
// backend prepares as it prepares a GGUF file's MXFP4 tensor (--weights auto: 17 bytes per 32 weights).
TensorView mxfp4_rows_view(const std::vector<uint8_t>& bytes, int rows, int cols, const std::string& origin);

// HF's default RoPE inverse frequencies, with the rope_scaling types we support applied.
std::vector<float> rope_inv_freq(int head_dim, double theta, const nlohmann::json& rope_scaling, const std::string& where);

// RoPE as transformers' modeling_rope_utils computes it for a rope_scaling (default, linear,
// llama3, yarn, dynamic): the inverse frequencies and what else the type asks of the engine.
struct RopeScaling {
  std::vector<float> inv_freq;    // [head_dim / 2]
  float attention_factor = 1.0f;  // YaRN: cos and sin are scaled by it (so q.k by its square)
  int context = 0;                // YaRN: factor x original_max_position_embeddings, the context it is made for
  int position_limit = 0;         // > 0 (dynamic): positions from here on are refused
};
// max_position_embeddings: yarn's factor when the config has none; dynamic's limit.
RopeScaling rope_scaling(int head_dim, double theta, const nlohmann::json& rope_scaling, int max_position_embeddings,
                         const std::string& where);
// config.json's rope_scaling, else transformers 5's rope_parameters (null when neither is given);
// a top-level original_max_position_embeddings is copied in (transformers gives it priority).
nlohmann::json rope_scaling_of(const nlohmann::json& config, const std::string& where);
// The RoPE frequencies, YaRN's attention factor and dynamic's position limit of a config.json into
// `t`, from the config's own max_position_embeddings (c's may be YaRN's longer context). Every
// RoPE architecture's load calls this, so none drops a part of the scaling.
void load_rope(TransformerWeights& t, const ModelConfig& c, const nlohmann::json& config);
// rope_parameters.rope_theta (transformers 5), else rope_theta, else 10000.
double rope_theta_of(const nlohmann::json& config, const std::string& where);

enum class Init { Normal, Ones, Zeros };
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::Normal;
};

struct ForwardStep;

struct Architecture {
  std::string name;                     // ModelConfig::architecture
  std::vector<std::string> model_types; // config.json "model_type"
  std::vector<std::string> classes;     // config.json "architectures"
  ModelConfig (*parse_config)(const nlohmann::json& config, const std::string& where);
  TransformerWeights (*load_weights)(const ModelConfig& config, const nlohmann::json& raw, const TensorSource& source,
                                     const LoadOptions& options, Backend& backend);
  // Every tensor of an HF checkpoint of this config, for make-model.
  std::vector<TensorSpec> (*tensor_layout)(const ModelConfig& config, const nlohmann::json& raw);
  // The forward graph (src/model/graph/blocks.h composes it): the logits of step.logit_rows and
  // the hidden states of step.hidden_rows.
  void (*forward)(const TransformerWeights& weights, ForwardStep& step);
};

const Architecture& gpt2_architecture();
const Architecture& qwen2_architecture();
const Architecture& llama_architecture();
const Architecture& qwen3_architecture();
const Architecture& mistral_architecture();
const Architecture& bert_architecture();
const Architecture& qwen3_moe_architecture();
const Architecture& gpt_oss_architecture();

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
                                    const LlamaStyle& style, const LoadOptions& options, Backend& backend);
// The Llama graph: RMSNorm, attention with RoPE (q/k norms and a sliding window when the weights
// and config have them), SwiGLU MLP, pre-norm residuals.
void llama_style_forward(const TransformerWeights& weights, ForwardStep& step);
// Qwen2 / Qwen3's sliding windows as their transformers configs set them (ModelConfig::layer_windows):
// use_sliding_window, sliding_window, and layer_types ("sliding_attention" / "full_attention") or,
// without it, max_window_layers (layers from that index on are windowed). Empty when none is.
std::vector<int> qwen_layer_windows(const nlohmann::json& config, int num_layers, const std::string& where);
std::vector<TensorSpec> llama_style_layout(const ModelConfig& config, const LlamaStyle& style);

class TransformerModel : public Model {
 public:
  TransformerModel(ModelConfig config, const Architecture& arch, TransformerWeights weights, std::unique_ptr<Backend> backend,
                   std::filesystem::path path);
  ~TransformerModel() override;
  const ModelConfig& config() const override { return config_; }
  const std::filesystem::path& path() const override { return path_; }
  using Model::forward_into;
  void forward_into(std::span<const BatchEntry> batch, KVCache& cache, StepOutputs& out) override;
  std::size_t decode_weight_bytes() const override;
  std::string weight_formats() const override;
  Backend& backend() override { return *backend_; }

 private:
  std::map<std::string, std::size_t> weight_bytes_by_format() const;
  ModelConfig config_;
  const Architecture& arch_;
  std::unique_ptr<Backend> backend_;  // declared before the weights it prepared: destroyed after them
  TransformerWeights w_;
  // Steps (activations) reused from one forward to the next; one per forward running at once.
  std::mutex idle_steps_mutex_;
  std::vector<std::unique_ptr<ForwardStep>> idle_steps_;
  std::filesystem::path path_;
};

}  // namespace inferlab
