// Qwen3 (Qwen3ForCausalLM): the Llama block without q/k/v biases (unless attention_bias), with an
// RMSNorm over each query and key head (self_attn.q_norm / k_norm) before RoPE. Tied or untied.
#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

LlamaStyle style_of(const nlohmann::json& j) {
  const bool bias = j.value("attention_bias", false);
  return {.qkv_bias = bias, .out_bias = bias, .mlp_bias = false, .qk_norm = true};
}

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c = parse_llama_style_config(j, where, "qwen3", true);
  c.layer_windows = qwen_layer_windows(j, c.num_layers, where);
  return c;
}
TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  return load_llama_style(c, raw, source, style_of(raw), options, backend);
}
std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json& raw) { return llama_style_layout(c, style_of(raw)); }

}  // namespace

const Architecture& qwen3_architecture() {
  static const Architecture arch{"qwen3", {"qwen3"}, {"Qwen3ForCausalLM"}, parse, load, layout, llama_style_forward};
  return arch;
}

}  // namespace inferlab
