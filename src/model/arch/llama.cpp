// Llama (LlamaForCausalLM): RoPE (rotate_half), GQA, RMSNorm, SwiGLU; biases only when
// attention_bias / mlp_bias say so. The llama-style helpers here are shared with qwen2.cpp,
// qwen3.cpp and mistral.cpp.
#include <algorithm>

#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/graph/blocks.h"
#include "model/transformer.h"

namespace inferlab {

ModelConfig parse_llama_style_config(const nlohmann::json& j, const std::string& where, const std::string& arch,
                                     bool tie_default) {
  ModelConfig c;
  c.architecture = arch;
  c.hidden_size = config_int(j, "hidden_size", where);
  c.num_layers = config_int(j, "num_hidden_layers", where);
  c.num_heads = config_int(j, "num_attention_heads", where);
  c.num_kv_heads = config_int_or(j, "num_key_value_heads", c.num_heads, where);
  c.intermediate_size = config_int(j, "intermediate_size", where);
  c.vocab_size = config_int(j, "vocab_size", where);
  c.max_position_embeddings = config_int(j, "max_position_embeddings", where);
  c.rope_theta = rope_theta_of(j, where);
  c.norm_eps = config_double_or(j, "rms_norm_eps", 1e-6, where);
  c.tie_word_embeddings = config_bool_or(j, "tie_word_embeddings", tie_default, where);
  if (c.hidden_size % c.num_heads != 0 && !j.contains("head_dim"))
    fail("{}: hidden_size {} is not divisible by num_attention_heads {}", where, c.hidden_size, c.num_heads);
  c.head_dim = config_int_or(j, "head_dim", c.hidden_size / c.num_heads, where);
  if (c.num_heads % c.num_kv_heads != 0)
    fail("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", where, c.num_heads, c.num_kv_heads);
  if (c.head_dim % 2 != 0) fail("{}: head_dim {} must be even for RoPE", where, c.head_dim);
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") fail("{}: hidden_act '{}' is not supported (silu)", where, act);
  // Rejects unknown types now. YaRN is made for factor x original_max_position_embeddings
  // positions (Qwen2.5's configs keep max_position_embeddings at the original 32768): that is the
  // context, as vLLM derives it.
  const nlohmann::json scaling = rope_scaling_of(j, where);
  // transformers rotates only the first partial_rotary_factor of each head then; not done here.
  for (const nlohmann::json* holder : {&j, &scaling})
    if (holder->is_object() && holder->contains("partial_rotary_factor") && (*holder)["partial_rotary_factor"].is_number() &&
        (*holder)["partial_rotary_factor"].get<double>() != 1.0)
      fail("{}: partial_rotary_factor {} is not supported (1.0)", where, (*holder)["partial_rotary_factor"].dump());
  const RopeScaling rope = rope_scaling(c.head_dim, c.rope_theta, scaling, c.max_position_embeddings, where);
  c.max_position_embeddings = std::max(c.max_position_embeddings, rope.context);
  return c;
}

TransformerWeights load_llama_style(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                                    const LlamaStyle& style, const LoadOptions& options, Backend& backend) {
  WeightLoader w(source, backend, options);
  const int H = c.hidden_size, I = c.intermediate_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  TransformerWeights t;
  load_rope(t, c, raw);
  w.embedding("model.embed_tokens.weight", c.vocab_size, H, t, c.tie_word_embeddings);
  auto bias = [](bool on, const std::string& name) { return on ? name : std::string(); };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.norm1_weight = w.tensor(p + "input_layernorm.weight", {H});
    L.qkv = w.fuse_rows({w.linear(p + "self_attn.q_proj.weight", q, H, bias(style.qkv_bias, p + "self_attn.q_proj.bias")),
                       w.linear(p + "self_attn.k_proj.weight", kv, H, bias(style.qkv_bias, p + "self_attn.k_proj.bias")),
                       w.linear(p + "self_attn.v_proj.weight", kv, H, bias(style.qkv_bias, p + "self_attn.v_proj.bias"))});
    if (style.qk_norm) {
      L.q_norm = w.tensor(p + "self_attn.q_norm.weight", {c.head_dim});
      L.k_norm = w.tensor(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    L.out = w.linear(p + "self_attn.o_proj.weight", H, q, bias(style.out_bias, p + "self_attn.o_proj.bias"));
    L.norm2_weight = w.tensor(p + "post_attention_layernorm.weight", {H});
    L.up = w.fuse_rows({w.linear(p + "mlp.gate_proj.weight", I, H, bias(style.mlp_bias, p + "mlp.gate_proj.bias")),
                      w.linear(p + "mlp.up_proj.weight", I, H, bias(style.mlp_bias, p + "mlp.up_proj.bias"))});
    L.down = w.linear(p + "mlp.down_proj.weight", H, I, bias(style.mlp_bias, p + "mlp.down_proj.bias"));
    t.layers.push_back(std::move(L));
  }
  t.final_norm_weight = w.tensor("model.norm.weight", {H});
  t.lm_head = c.tie_word_embeddings ? tied_head(t, c.vocab_size, H) : w.output("lm_head.weight", c.vocab_size, H);
  return t;
}

void llama_style_forward(const TransformerWeights& w, ForwardStep& s) {
  embed_tokens(s, w);
  rope_table(s, w);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    norm(s, Norm::RMS, s.x, L.norm1_weight, L.norm1_bias, s.normed);
    const int window = s.config.layer_windows.empty() ? s.config.sliding_window : s.config.layer_windows[l];
    attention(s, static_cast<int>(l), L, {.rope = true, .window = window});
    s.backend.add(s.x, s.proj);
    norm(s, Norm::RMS, s.x, L.norm2_weight, L.norm2_bias, s.normed);
    dense_mlp(s, L, Activation::SwiGLU);
    s.backend.add(s.x, s.proj);
  }
  output_logits(s, w, Norm::RMS);
}

std::vector<TensorSpec> llama_style_layout(const ModelConfig& c, const LlamaStyle& style) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> specs{{"model.embed_tokens.weight", {c.vocab_size, H}}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {H}, Init::Ones});
    specs.push_back({p + "self_attn.q_proj.weight", {q, H}});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, H}});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, H}});
    if (style.qkv_bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {q}});
      specs.push_back({p + "self_attn.k_proj.bias", {kv}});
      specs.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (style.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, Init::Ones});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, Init::Ones});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {H, q}});
    if (style.out_bias) specs.push_back({p + "self_attn.o_proj.bias", {H}, Init::Zeros});
    specs.push_back({p + "post_attention_layernorm.weight", {H}, Init::Ones});
    specs.push_back({p + "mlp.gate_proj.weight", {I, H}});
    specs.push_back({p + "mlp.up_proj.weight", {I, H}});
    specs.push_back({p + "mlp.down_proj.weight", {H, I}});
    if (style.mlp_bias) {
      specs.push_back({p + "mlp.gate_proj.bias", {I}, Init::Zeros});
      specs.push_back({p + "mlp.up_proj.bias", {I}, Init::Zeros});
      specs.push_back({p + "mlp.down_proj.bias", {H}, Init::Zeros});
    }
  }
  specs.push_back({"model.norm.weight", {H}, Init::Ones});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, H}});
  return specs;
}

namespace {

LlamaStyle style_of(const nlohmann::json& j) {
  LlamaStyle s;
  s.qkv_bias = s.out_bias = j.value("attention_bias", false);
  s.mlp_bias = j.value("mlp_bias", false);
  return s;
}

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  return parse_llama_style_config(j, where, "llama", false);
}
TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  return load_llama_style(c, raw, source, style_of(raw), options, backend);
}
std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json& raw) { return llama_style_layout(c, style_of(raw)); }

}  // namespace

const Architecture& llama_architecture() {
  static const Architecture arch{"llama", {"llama"}, {"LlamaForCausalLM"}, parse, load, layout, llama_style_forward};
  return arch;
}

}  // namespace inferlab
