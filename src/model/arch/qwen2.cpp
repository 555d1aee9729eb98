// Qwen2 (Qwen2ForCausalLM): the Llama block with biases on q/k/v (never on o_proj or the MLP),
// and sliding-window attention on the layers its config names (qwen_layer_windows, shared with Qwen3).
#include <algorithm>

#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

const LlamaStyle kQwen2{.qkv_bias = true, .out_bias = false, .mlp_bias = false};

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c = parse_llama_style_config(j, where, "qwen2", false);
  c.layer_windows = qwen_layer_windows(j, c.num_layers, where);
  return c;
}
TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  return load_llama_style(c, raw, source, kQwen2, options, backend);
}
std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json&) { return llama_style_layout(c, kQwen2); }

}  // namespace

std::vector<int> qwen_layer_windows(const nlohmann::json& j, int num_layers, const std::string& where) {
  // Qwen2Config.__post_init__: sliding_window counts only with use_sliding_window (else None); its
  // class default is 4096 and max_window_layers' is 28.
  const bool use = config_bool_or(j, "use_sliding_window", false, where);
  int window = 0;
  if (use && !j.contains("sliding_window")) window = 4096;
  else if (use && !j["sliding_window"].is_null()) {
    window = config_int(j, "sliding_window", where);  // a positive integer, else an error naming it
  }
  std::vector<int> windows(num_layers, 0);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const nlohmann::json& types = j["layer_types"];
    if (!types.is_array() || static_cast<int>(types.size()) != num_layers)
      fail("{}: layer_types must be a list of num_hidden_layers ({}) entries", where, num_layers);
    for (int l = 0; l < num_layers; ++l) {
      const std::string type = types[l].is_string() ? types[l].get<std::string>() : types[l].dump();
      if (type == "full_attention") continue;
      if (type != "sliding_attention")
        fail("{}: layer_types[{}] '{}' is not supported (full_attention, sliding_attention)", where, l, type);
      if (window == 0)
        fail("{}: layer_types[{}] is sliding_attention but there is no sliding_window (use_sliding_window {}, "
             "sliding_window {})", where, l, use, j.value("sliding_window", nlohmann::json()).dump());
      windows[l] = window;
    }
  } else if (window > 0) {
    // 0 is a real value here (every layer windowed), which config_int_or's range refuses.
    int first = 28;
    if (j.contains("max_window_layers") && !j["max_window_layers"].is_null()) {
      const nlohmann::json& v = j["max_window_layers"];
      if (!v.is_number_integer() || v.get<int64_t>() < 0)
        fail("{}: key \"max_window_layers\" must be an integer >= 0, got {}", where, v.dump());
      first = static_cast<int>(std::min<int64_t>(v.get<int64_t>(), num_layers));
    }
    for (int l = first; l < num_layers; ++l) windows[l] = window;
  }
  if (std::all_of(windows.begin(), windows.end(), [](int w) { return w == 0; })) return {};
  return windows;
}

const Architecture& qwen2_architecture() {
  static const Architecture arch{"qwen2", {"qwen2"}, {"Qwen2ForCausalLM"}, parse, load, layout, llama_style_forward};
  return arch;
}

}  // namespace inferlab
