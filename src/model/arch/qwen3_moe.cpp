// Qwen3-MoE (Qwen3MoeForCausalLM, GGUF "qwen3moe"): Qwen3's attention (per-head q/k RMSNorm before
// RoPE) with a mixture-of-experts feed-forward in the sparse layers: the router mlp.gate
// [experts][hidden], softmax, the top num_experts_per_tok, renormalised to sum 1 when
// norm_topk_prob, and the weighted sum of those experts' SwiGLU MLPs (mlp.experts.E.{gate,up,down}_proj,
// moe_intermediate_size wide). Layer l is sparse unless it is in mlp_only_layers or
// (l + 1) % decoder_sparse_step != 0; the others keep a dense SwiGLU MLP of intermediate_size.
// Experts are read per expert as the Hub's checkpoints store them, or from transformers' fused 3-D
// mlp.experts.gate_up_proj / down_proj.
#include <algorithm>

#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/graph/blocks.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

using nlohmann::json;

struct MoeShape {
  int experts = 0, per_token = 0, expert_inter = 0;
  bool normalize = false;
  std::vector<bool> sparse;  // per layer: a mixture of experts, else the dense MLP
};

// transformers 5 writes rope_theta (and any scaling) inside rope_parameters; the Hub's configs keep
// them at the top level, where the llama-style parser reads them.
json with_top_level_rope(const json& raw) {
  json j = raw;
  if (!raw.contains("rope_parameters") || !raw["rope_parameters"].is_object()) return j;
  const json& rope = raw["rope_parameters"];
  if (!j.contains("rope_theta") && rope.contains("rope_theta")) j["rope_theta"] = rope["rope_theta"];
  const std::string type = rope.value("rope_type", rope.value("type", std::string("default")));
  if (type != "default" && (!j.contains("rope_scaling") || j["rope_scaling"].is_null())) j["rope_scaling"] = rope;
  return j;
}

MoeShape moe_shape(const json& j, int layers, const std::string& where) {
  MoeShape m;
  // Hub configs name the count num_experts; transformers 5's save_pretrained num_local_experts.
  if (j.contains("num_experts") && j.contains("num_local_experts") && j["num_experts"] != j["num_local_experts"])
    fail("{}: num_experts {} and num_local_experts {} disagree", where, j["num_experts"].dump(), j["num_local_experts"].dump());
  // config_int refuses 0 or less naming the key: no experts, or a sparse step of 0, is not a model
  // this architecture runs.
  m.experts = config_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", where);
  const int step = config_int_or(j, "decoder_sparse_step", 1, where);
  m.sparse.assign(layers, false);
  for (int l = 0; l < layers; ++l) m.sparse[l] = (l + 1) % step == 0;
  const json dense = j.value("mlp_only_layers", json::array());
  if (!dense.is_null() && !dense.is_array()) fail("{}: mlp_only_layers must be a list of layer indices, found {}", where, dense.dump());
  for (const json& l : dense.is_array() ? dense : json::array()) {
    if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= layers)
      fail("{}: mlp_only_layers entry {} is not a layer index 0..{}", where, l.dump(), layers - 1);
    m.sparse[l.get<int>()] = false;
  }
  if (std::find(m.sparse.begin(), m.sparse.end(), true) == m.sparse.end()) return m;
  m.per_token = config_int(j, "num_experts_per_tok", where);
  if (m.per_token < 1 || m.per_token > m.experts)
    fail("{}: num_experts_per_tok {} is outside 1..num_experts ({})", where, m.per_token, m.experts);
  m.expert_inter = config_int(j, "moe_intermediate_size", where);
  m.normalize = config_bool_or(j, "norm_topk_prob", false, where);
  return m;
}

LlamaStyle style_of(const json& j) {
  const bool bias = j.value("attention_bias", false);
  return {.qkv_bias = bias, .out_bias = bias, .mlp_bias = false, .qk_norm = true};
}

ModelConfig parse(const json& raw, const std::string& where) {
  const json j = with_top_level_rope(raw);
  if (config_bool_or(j, "use_sliding_window", false, where))
    fail("{}: use_sliding_window true is not supported for qwen3_moe", where);
  ModelConfig c = parse_llama_style_config(j, where, "qwen3_moe", false);
  moe_shape(j, c.num_layers, where);  // refuses what the forward does not implement, now
  return c;
}

std::string expert_name(const std::string& layer, int expert, const char* matrix) {
  return layer + "mlp.experts." + std::to_string(expert) + "." + matrix + ".weight";
}

// transformers' in-memory layout, which some checkpoints keep: all experts of a layer in one 3-D
// tensor, mlp.experts.gate_up_proj [experts][2 * inter][hidden] (gate rows, then up rows: our fused
// order) and mlp.experts.down_proj [experts][hidden][inter]. Expert e is a contiguous slice of it.
Linear fused_expert(const TensorSource& source, const std::string& name, int experts, int expert, int rows, int cols,
                    const LoadOptions& options, Backend& backend) {
  TensorView view = source.require(name);
  if (view.shape != std::vector<int64_t>{experts, rows, cols})
    fail("tensor '{}' in {} has shape {} but config.json implies {}", name, view.origin, shape_string(view.shape),
         shape_string({experts, rows, cols}));
  if (view.ggml_type >= 0) fail("tensor '{}' in {}: fused experts are read from safetensors only", name, view.origin);
  view.shape = {rows, cols};
  view.bytes /= static_cast<std::size_t>(experts);
  view.data = static_cast<const uint8_t*>(view.data) + view.bytes * static_cast<std::size_t>(expert);
  Linear layer;
  layer.in = cols;
  layer.out = rows;
  layer.weight = backend.matrix(view, rows, cols, options.weights);
  return layer;
}

TransformerWeights load(const ModelConfig& c, const json& raw, const TensorSource& source, const LoadOptions& options,
                        Backend& backend) {
  const json j = with_top_level_rope(raw);
  const MoeShape moe = moe_shape(j, c.num_layers, "config.json");
  const LlamaStyle style = style_of(j);
  WeightLoader w(source, backend, options);
  const int H = c.hidden_size, I = c.intermediate_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  TransformerWeights t;
  load_rope(t, c, j);
  w.embedding("model.embed_tokens.weight", c.vocab_size, H, t, c.tie_word_embeddings);
  auto bias = [](bool on, const std::string& name) { return on ? name : std::string(); };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.norm1_weight = w.tensor(p + "input_layernorm.weight", {H});
    L.qkv = w.fuse_rows({w.linear(p + "self_attn.q_proj.weight", q, H, bias(style.qkv_bias, p + "self_attn.q_proj.bias")),
                         w.linear(p + "self_attn.k_proj.weight", kv, H, bias(style.qkv_bias, p + "self_attn.k_proj.bias")),
                         w.linear(p + "self_attn.v_proj.weight", kv, H, bias(style.qkv_bias, p + "self_attn.v_proj.bias"))});
    L.q_norm = w.tensor(p + "self_attn.q_norm.weight", {c.head_dim});
    L.k_norm = w.tensor(p + "self_attn.k_norm.weight", {c.head_dim});
    L.out = w.linear(p + "self_attn.o_proj.weight", H, q, bias(style.out_bias, p + "self_attn.o_proj.bias"));
    L.norm2_weight = w.tensor(p + "post_attention_layernorm.weight", {H});
    if (!moe.sparse[l]) {
      L.up = w.fuse_rows({w.linear(p + "mlp.gate_proj.weight", I, H), w.linear(p + "mlp.up_proj.weight", I, H)});
      L.down = w.linear(p + "mlp.down_proj.weight", H, I);
      t.layers.push_back(std::move(L));
      continue;
    }
    const int E = moe.experts, EI = moe.expert_inter;
    L.router.in = H;
    L.router.out = E;
    L.router.weight = w.table(p + "mlp.gate.weight", E, H);
    L.experts_per_token = moe.per_token;
    L.normalize_expert_weights = moe.normalize;
    L.experts.reserve(E);
    const bool fused = !w.has(expert_name(p, 0, "gate_proj")) && w.has(p + "mlp.experts.gate_up_proj");
    for (int e = 0; e < E; ++e) {
      ExpertWeights expert;
      if (fused) {
        expert.gate_up = fused_expert(source, p + "mlp.experts.gate_up_proj", E, e, 2 * EI, H, options, backend);
        expert.down = fused_expert(source, p + "mlp.experts.down_proj", E, e, H, EI, options, backend);
      } else {
        expert.gate_up = w.fuse_rows({w.linear(expert_name(p, e, "gate_proj"), EI, H), w.linear(expert_name(p, e, "up_proj"), EI, H)});
        expert.down = w.linear(expert_name(p, e, "down_proj"), H, EI);
      }
      L.experts.push_back(std::move(expert));
    }
    t.layers.push_back(std::move(L));
  }
  t.final_norm_weight = w.tensor("model.norm.weight", {H});
  t.lm_head = c.tie_word_embeddings ? tied_head(t, c.vocab_size, H) : w.output("lm_head.weight", c.vocab_size, H);
  return t;
}

std::vector<TensorSpec> layout(const ModelConfig& c, const json& raw) {
  const json j = with_top_level_rope(raw);
  const MoeShape moe = moe_shape(j, c.num_layers, "config");
  std::vector<TensorSpec> specs;
  for (TensorSpec& spec : llama_style_layout(c, style_of(j))) {
    // llama_style_layout gives every layer a dense MLP: a sparse layer's becomes router + experts.
    const std::string prefix = "model.layers.";
    if (spec.name.rfind(prefix, 0) != 0) {
      specs.push_back(std::move(spec));
      continue;
    }
    const int l = std::stoi(spec.name.substr(prefix.size()));
    const std::string p = prefix + std::to_string(l) + ".";
    if (!moe.sparse[l] || spec.name.rfind(p + "mlp.", 0) != 0) {
      specs.push_back(std::move(spec));
      continue;
    }
    if (spec.name != p + "mlp.down_proj.weight") continue;  // the last of the three: add the experts once
    const int64_t H = c.hidden_size, EI = moe.expert_inter;
    specs.push_back({p + "mlp.gate.weight", {moe.experts, H}});
    for (int e = 0; e < moe.experts; ++e) {
      specs.push_back({expert_name(p, e, "gate_proj"), {EI, H}});
      specs.push_back({expert_name(p, e, "up_proj"), {EI, H}});
      specs.push_back({expert_name(p, e, "down_proj"), {H, EI}});
    }
  }
  return specs;
}

void forward(const TransformerWeights& w, ForwardStep& s) {
  embed_tokens(s, w);
  rope_table(s, w);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    norm(s, Norm::RMS, s.x, L.norm1_weight, L.norm1_bias, s.normed);
    attention(s, static_cast<int>(l), L, {.rope = true, .window = s.config.sliding_window});
    s.backend.add(s.x, s.proj);
    norm(s, Norm::RMS, s.x, L.norm2_weight, L.norm2_bias, s.normed);
    if (L.experts.empty()) dense_mlp(s, L, Activation::SwiGLU);
    else moe_mlp(s, L);
    s.backend.add(s.x, s.proj);
  }
  output_logits(s, w, Norm::RMS);
}

}  // namespace

const Architecture& qwen3_moe_architecture() {
  static const Architecture arch{"qwen3_moe", {"qwen3_moe"}, {"Qwen3MoeForCausalLM"}, parse, load, layout, forward};
  return arch;
}

}  // namespace inferlab
