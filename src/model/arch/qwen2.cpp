// Qwen2 (Qwen2ForCausalLM): the Llama block with biases on q/k/v (never on o_proj or the MLP).
#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

const LlamaStyle kQwen2{.qkv_bias = true, .out_bias = false, .mlp_bias = false};

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  if (config_bool_or(j, "use_sliding_window", false, where))
    fail("{}: use_sliding_window true is not supported", where);
  return parse_llama_style_config(j, where, "qwen2", false);
}
TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  return load_llama_style(c, raw, source, kQwen2, options, backend);
}
std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json&) { return llama_style_layout(c, kQwen2); }

}  // namespace

const Architecture& qwen2_architecture() {
  static const Architecture arch{"qwen2", {"qwen2"}, {"Qwen2ForCausalLM"}, parse, load, layout, llama_style_forward};
  return arch;
}

}  // namespace inferlab
