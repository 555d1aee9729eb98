// GPT-2 (GPT2LMHeadModel): learned positions, LayerNorm, gelu_new MLP, Conv1D weights stored
// [in][out]. Real checkpoints name tensors "transformer.h.N..." or, like the original gpt2 repo,
// without the "transformer." prefix; attn.bias / attn.masked_bias buffers are ignored.
// "linear_weights": true (set by the GGUF loader, as llama.cpp's gpt2 files store them) reads the
// same matrices as linear layers [out][in] instead: as stored, in any ggml type, with c_attn kept
// one fused q|k|v matrix.
#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/graph/blocks.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c;
  c.architecture = "gpt2";
  c.hidden_size = config_int(j, "n_embd", where);
  c.num_layers = config_int(j, "n_layer", where);
  c.num_heads = config_int(j, "n_head", where);
  c.num_kv_heads = c.num_heads;
  c.vocab_size = config_int(j, "vocab_size", where);
  c.max_position_embeddings = j.contains("n_positions") ? config_int(j, "n_positions", where) : config_int(j, "n_ctx", where);
  c.intermediate_size = config_int_or(j, "n_inner", 4 * c.hidden_size, where);
  c.norm_eps = config_double_or(j, "layer_norm_epsilon", 1e-5, where);
  c.tie_word_embeddings = config_bool_or(j, "tie_word_embeddings", true, where);
  if (c.hidden_size % c.num_heads != 0) fail("{}: n_embd {} is not divisible by n_head {}", where, c.hidden_size, c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  const std::string act = j.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu")
    fail("{}: activation_function '{}' is not supported (gelu_new, gelu_pytorch_tanh, gelu)", where, act);
  if (config_bool_or(j, "scale_attn_by_inverse_layer_idx", false, where) || config_bool_or(j, "reorder_and_upcast_attn", false, where))
    fail("{}: scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported", where);
  if (!config_bool_or(j, "scale_attn_weights", true, where)) fail("{}: scale_attn_weights false is not supported", where);
  return c;
}

TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  WeightLoader w(source, backend, options);
  const bool linear = config_bool_or(raw, "linear_weights", false, source.describe());
  auto dense = [&](const std::string& weight, int in, int out, const std::string& bias) {
    return linear ? w.linear(weight, out, in, bias) : w.conv1d(weight, in, out, bias);
  };
  const std::string p = w.has("transformer.wte.weight") ? "transformer." : "";
  const int H = c.hidden_size, I = c.intermediate_size;
  TransformerWeights t;
  t.gelu_erf = raw.value("activation_function", std::string("gelu_new")) == "gelu";
  w.embedding(p + "wte.weight", c.vocab_size, H, t, c.tie_word_embeddings);
  t.position_embedding = w.table(p + "wpe.weight", c.max_position_embeddings, H);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string h = p + "h." + std::to_string(l) + ".";
    LayerWeights L;
    L.norm1_weight = w.tensor(h + "ln_1.weight", {H});
    L.norm1_bias = w.tensor(h + "ln_1.bias", {H});
    L.qkv = dense(h + "attn.c_attn.weight", H, 3 * H, h + "attn.c_attn.bias");  // q | k | v: Conv1D columns, linear rows
    L.out = dense(h + "attn.c_proj.weight", H, H, h + "attn.c_proj.bias");
    L.norm2_weight = w.tensor(h + "ln_2.weight", {H});
    L.norm2_bias = w.tensor(h + "ln_2.bias", {H});
    L.up = dense(h + "mlp.c_fc.weight", H, I, h + "mlp.c_fc.bias");
    L.down = dense(h + "mlp.c_proj.weight", I, H, h + "mlp.c_proj.bias");
    t.layers.push_back(std::move(L));
  }
  t.final_norm_weight = w.tensor(p + "ln_f.weight", {H});
  t.final_norm_bias = w.tensor(p + "ln_f.bias", {H});
  t.lm_head = c.tie_word_embeddings ? tied_head(t, c.vocab_size, H) : w.output("lm_head.weight", c.vocab_size, H);
  return t;
}

// Learned positions, LayerNorm, GELU MLP, pre-norm residuals; no RoPE.
void forward(const TransformerWeights& w, ForwardStep& s) {
  embed_tokens(s, w);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    norm(s, Norm::Layer, s.x, L.norm1_weight, L.norm1_bias, s.normed);
    attention(s, static_cast<int>(l), L, {.rope = false});
    s.backend.add(s.x, s.proj);
    norm(s, Norm::Layer, s.x, L.norm2_weight, L.norm2_bias, s.normed);
    dense_mlp(s, L, w.gelu_erf ? Activation::GeluErf : Activation::GeluTanh);
    s.backend.add(s.x, s.proj);
  }
  output_logits(s, w, Norm::Layer);
}

std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json&) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  std::vector<TensorSpec> specs{{"transformer.wte.weight", {c.vocab_size, H}},
                                {"transformer.wpe.weight", {c.max_position_embeddings, H}}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    specs.push_back({h + "ln_1.weight", {H}, Init::Ones});
    specs.push_back({h + "ln_1.bias", {H}, Init::Zeros});
    specs.push_back({h + "attn.c_attn.weight", {H, 3 * H}});
    specs.push_back({h + "attn.c_attn.bias", {3 * H}, Init::Zeros});
    specs.push_back({h + "attn.c_proj.weight", {H, H}});
    specs.push_back({h + "attn.c_proj.bias", {H}, Init::Zeros});
    specs.push_back({h + "ln_2.weight", {H}, Init::Ones});
    specs.push_back({h + "ln_2.bias", {H}, Init::Zeros});
    specs.push_back({h + "mlp.c_fc.weight", {H, I}});
    specs.push_back({h + "mlp.c_fc.bias", {I}, Init::Zeros});
    specs.push_back({h + "mlp.c_proj.weight", {I, H}});
    specs.push_back({h + "mlp.c_proj.bias", {H}, Init::Zeros});
  }
  specs.push_back({"transformer.ln_f.weight", {H}, Init::Ones});
  specs.push_back({"transformer.ln_f.bias", {H}, Init::Zeros});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, H}});
  return specs;
}

}  // namespace

const Architecture& gpt2_architecture() {
  static const Architecture arch{"gpt2", {"gpt2"}, {"GPT2LMHeadModel", "GPT2Model"}, parse, load, layout, forward};
  return arch;
}

}  // namespace inferlab
