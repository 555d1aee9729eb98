// Mistral (MistralForCausalLM): the Llama block (no biases) with sliding-window attention: with
// sliding_window W, position p attends to positions p-W+1..p only (transformers' mask), in the
// prompt pass and over the paged KV cache alike. sliding_window null: plain causal attention.
#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

const LlamaStyle kMistral{};

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c = parse_llama_style_config(j, where, "mistral", false);
  if (j.contains("sliding_window") && !j["sliding_window"].is_null()) {
    c.sliding_window = config_int(j, "sliding_window", where);
    if (c.sliding_window <= 0) fail("{}: sliding_window must be a positive number of positions or null, got {}", where, c.sliding_window);
  }
  return c;
}
TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  return load_llama_style(c, raw, source, kMistral, options, backend);
}
std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json&) { return llama_style_layout(c, kMistral); }

}  // namespace

const Architecture& mistral_architecture() {
  static const Architecture arch{"mistral", {"mistral"}, {"MistralForCausalLM"}, parse, load, layout, llama_style_forward};
  return arch;
}

}  // namespace inferlab
