// gpt-oss (GptOssForCausalLM, model_type gpt_oss): pre-norm RMSNorm blocks whose attention has
// q/k/v/o biases, GQA, YaRN RoPE, a learned sink logit per head (self_attn.sinks: it joins each
// softmax denominator and carries no value) and a sliding window on the layers layer_types names
// (by default the even ones); and a mixture-of-experts MLP in every layer: the router
// mlp.router (weight and bias) -> the top num_experts_per_tok logits -> softmax over those, and
// the chosen experts' clamped SwiGLU MLPs with biases.
//
// Experts come stacked per layer, as transformers holds them: mlp.experts.gate_up_proj
// [experts][hidden][2 * inter] (x @ W, gate and up interleaved: gate = [..., ::2], up = [..., 1::2])
// with gate_up_proj_bias [experts][2 * inter], and down_proj [experts][inter][hidden] with
// down_proj_bias [experts][hidden]. The Hub's checkpoints keep gate_up_proj / down_proj in MXFP4
// instead: *_blocks [experts][out][in / 32][16] (two e2m1 codes a byte, the low nibble first) and
// *_scales [experts][out][in / 32] (e8m0: 2^(byte - 127)), rows in [out][in] order. Both are laid
// out here as the backend's fused [gate rows | up rows] [2 * inter][hidden] and down [hidden][inter];
// MXFP4 experts are handed to the backend as GGUF's MXFP4 blocks (the same scale bytes and codes,
// re-paired), which --weights auto packs into the mxfp4 panels, as a GGUF file's (17 bytes per 32
// weights; --weights f32 / bf16 widen them exactly). GGUF files (llama.cpp's "gpt-oss",
// gguf_model.cpp) hold each expert's gate, up and down apart, in the file's type.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "inferlab/util/error.h"
#include "inferlab/loading/json_config.h"
#include "model/graph/blocks.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

using nlohmann::json;

struct ExpertShape {
  int experts = 0, per_token = 0;
  ExpertActivation activation;
};

// GptOssConfig's defaults where they differ from the llama-style parser's (rms_norm_eps, head_dim,
// num_key_value_heads, sliding_window, rope_theta, YaRN when no RoPE parameters are given at all).
json with_defaults(const json& raw) {
  json j = raw;
  auto absent = [&](const char* key) { return !j.contains(key) || j[key].is_null(); };
  if (absent("rms_norm_eps")) j["rms_norm_eps"] = 1e-5;
  if (absent("head_dim")) j["head_dim"] = 64;
  if (absent("num_key_value_heads")) j["num_key_value_heads"] = 8;
  if (!j.contains("sliding_window")) j["sliding_window"] = 128;  // an explicit null stays: no window
  const bool rope_given = (!absent("rope_scaling") && !j["rope_scaling"].empty()) ||
                          (!absent("rope_parameters") && !j["rope_parameters"].empty());
  if (!rope_given)
    j["rope_scaling"] = {{"rope_type", "yarn"},  {"factor", 32.0},   {"beta_fast", 32.0},
                         {"beta_slow", 1.0},     {"truncate", false}, {"original_max_position_embeddings", 4096}};
  const bool theta_inside = !absent("rope_parameters") && j["rope_parameters"].is_object() &&
                            j["rope_parameters"].contains("rope_theta");
  if (absent("rope_theta") && !theta_inside) j["rope_theta"] = 150000.0;
  return j;
}

ExpertShape expert_shape(const json& j, const std::string& where) {
  ExpertShape m;
  if (j.contains("num_experts") && j.contains("num_local_experts") && j["num_experts"] != j["num_local_experts"])
    fail("{}: num_experts {} and num_local_experts {} disagree", where, j["num_experts"].dump(), j["num_local_experts"].dump());
  m.experts = config_int(j, j.contains("num_local_experts") ? "num_local_experts" : "num_experts", where);
  m.per_token = config_int_or(j, "num_experts_per_tok", 4, where);
  if (m.per_token > m.experts)
    fail("{}: num_experts_per_tok {} is more than num_local_experts ({})", where, m.per_token, m.experts);
  m.activation.kind = ExpertActivation::Kind::ClampedSwiGLU;
  m.activation.alpha = static_cast<float>(config_double_or(j, "swiglu_alpha", 1.702, where));
  m.activation.limit = static_cast<float>(config_double_or(j, "swiglu_limit", 7.0, where));
  if (!(m.activation.limit > 0)) fail("{}: swiglu_limit {} must be > 0", where, m.activation.limit);
  return m;
}

// Per layer: sliding_window for a "sliding_attention" layer, 0 for "full_attention"; without
// layer_types, GptOssConfig's alternation (layer i slides when i is even).
std::vector<int> layer_windows(const json& j, int layers, const std::string& where) {
  std::vector<std::string> types(layers);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& given = j["layer_types"];
    if (!given.is_array() || static_cast<int>(given.size()) != layers)
      fail("{}: layer_types must be a list of num_hidden_layers ({}) entries", where, layers);
    for (int l = 0; l < layers; ++l) types[l] = given[l].is_string() ? given[l].get<std::string>() : given[l].dump();
  } else {
    for (int l = 0; l < layers; ++l) types[l] = l % 2 == 0 ? "sliding_attention" : "full_attention";
  }
  std::vector<int> windows(layers, 0);
  for (int l = 0; l < layers; ++l) {
    if (types[l] == "full_attention") continue;
    if (types[l] != "sliding_attention")
      fail("{}: layer_types[{}] '{}' is not supported (full_attention, sliding_attention)", where, l, types[l]);
    if (!j.contains("sliding_window") || j["sliding_window"].is_null())
      fail("{}: layer_types[{}] is sliding_attention but sliding_window is null", where, l);
    windows[l] = config_int(j, "sliding_window", where);
  }
  return windows;
}

ModelConfig parse(const json& raw, const std::string& where) {
  const json j = with_defaults(raw);
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const std::string method = j["quantization_config"].value("quant_method", std::string());
    if (method != "mxfp4")
      fail("{}: quantization_config.quant_method '{}' is not supported (mxfp4, or none)", where, method);
  }
  ModelConfig c = parse_llama_style_config(j, where, "gpt_oss", false);
  c.layer_windows = layer_windows(j, c.num_layers, where);
  expert_shape(j, where);  // refuses now what the forward does not implement
  return c;
}

// Row r of the fused [gate | up] matrix is row gate_up_row(r) of the checkpoint's interleaved one.
int gate_up_row(int r, int inter) { return r < inter ? 2 * r : 2 * (r - inter) + 1; }

// A matrix the loader assembled in memory (`view` over its bytes), handed to the backend (which
// copies it). The view's origin names no file: the backend releases a file's pages after reading
// them, never a buffer's.
Linear owned_linear(Backend& backend, const LoadOptions& options, const TensorView& view, int rows, int cols) {
  Linear layer;
  layer.in = cols;
  layer.out = rows;
  layer.weight = backend.matrix(view, rows, cols, options.weights);
  return layer;
}

TensorView stacked(const TensorSource& source, const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView view = source.require(name);
  if (view.shape != shape)
    fail("tensor '{}' in {} has shape {} but config.json implies {}", name, view.origin, shape_string(view.shape),
         shape_string(shape));
  if (view.ggml_type >= 0) fail("tensor '{}' in {}: stacked experts are read from safetensors only", name, view.origin);
  return view;
}

// Expert e of transformers' stacked [experts][in][out] tensor (x @ W) as [out][in] rows in the
// stored dtype; out row r is stored column source_row(r).
template <typename SourceRow>
Linear transposed_expert(const TensorView& view, int expert, int in, int out, SourceRow source_row, Backend& backend,
                         const LoadOptions& options) {
  const std::size_t size = dtype_size(view.dtype);
  if (view.dtype == DType::U8) fail("tensor in {}: experts stored as U8 need their *_blocks / *_scales pair", view.origin);
  const auto* from = static_cast<const uint8_t*>(view.data) + static_cast<std::size_t>(expert) * in * out * size;
  std::vector<uint8_t> bytes(static_cast<std::size_t>(in) * out * size);
  for (int r = 0; r < out; ++r) {
    const std::size_t column = static_cast<std::size_t>(source_row(r));
    for (int c = 0; c < in; ++c)
      std::memcpy(&bytes[(static_cast<std::size_t>(r) * in + c) * size], from + (static_cast<std::size_t>(c) * out + column) * size, size);
  }
  const TensorView rearranged{view.dtype, {out, in}, bytes.data(), bytes.size(), "stacked experts, rearranged"};
  return owned_linear(backend, options, rearranged, out, in);
}

// Expert e of an MXFP4 pair (*_blocks [experts][out][in / 32][16], *_scales [experts][out][in / 32])
// as rows of GGUF's MXFP4 blocks [out][in / 32] (out row r is stored row source_row(r)): each block's
// scale byte, then its 32 codes re-paired from the Hub's order (byte j: elements 2j and 2j + 1, the
// low nibble first) into GGUF's (byte j: elements j and j + 16). No value changes.
template <typename SourceRow>
Linear mxfp4_expert(const TensorView& blocks, const TensorView& scales, int expert, int out, int in, SourceRow source_row,
                    Backend& backend, const LoadOptions& options) {
  constexpr int kGgufBlockBytes = 17;
  const int groups = in / 32;
  const auto* block_bytes = static_cast<const uint8_t*>(blocks.data);
  const auto* scale_bytes = static_cast<const uint8_t*>(scales.data);
  std::vector<uint8_t> bytes(static_cast<std::size_t>(out) * groups * kGgufBlockBytes);
  for (int r = 0; r < out; ++r) {
    const std::size_t stored = static_cast<std::size_t>(expert) * out + source_row(r);
    for (int g = 0; g < groups; ++g) {
      const uint8_t* codes = block_bytes + (stored * groups + g) * 16;
      auto code = [codes](int k) { return (codes[k / 2] >> (4 * (k % 2))) & 0x0F; };
      uint8_t* to = bytes.data() + (static_cast<std::size_t>(r) * groups + g) * kGgufBlockBytes;
      to[0] = scale_bytes[stored * groups + g];
      for (int j = 0; j < 16; ++j) to[1 + j] = static_cast<uint8_t>(code(j) | (code(j + 16) << 4));
    }
  }
  return owned_linear(backend, options, mxfp4_rows_view(bytes, out, in, "MXFP4 experts as GGUF's blocks"), out, in);
}

std::string expert_name(const std::string& experts, int expert, const char* matrix) {
  return experts + std::to_string(expert) + "." + matrix + ".weight";
}

// GGUF's layout (gguf_model.cpp): gate, up and down per expert in the file's own type (MXFP4, bf16,
// a quantized one), gate and up apart with a bias tensor each ([experts][inter]): fused here as
// [gate | up] like the other layouts.
std::vector<ExpertWeights> split_experts(const std::string& x, const ModelConfig& c, const ExpertShape& m,
                                         const WeightLoader& w, const std::vector<float>& down_bias) {
  const int E = m.experts, H = c.hidden_size, I = c.intermediate_size;
  const std::vector<float> gate_bias = w.tensor(x + "gate_proj_bias", {E, I});
  const std::vector<float> up_bias = w.tensor(x + "up_proj_bias", {E, I});
  std::vector<ExpertWeights> experts(E);
  for (int e = 0; e < E; ++e) {
    ExpertWeights& expert = experts[e];
    expert.gate_up = w.fuse_rows({w.linear(expert_name(x, e, "gate_proj"), I, H), w.linear(expert_name(x, e, "up_proj"), I, H)});
    expert.down = w.linear(expert_name(x, e, "down_proj"), H, I);
    const auto at = [e](const std::vector<float>& v, int n) { return v.begin() + static_cast<std::ptrdiff_t>(e) * n; };
    expert.gate_up.bias.assign(at(gate_bias, I), at(gate_bias, I) + I);
    expert.gate_up.bias.insert(expert.gate_up.bias.end(), at(up_bias, I), at(up_bias, I) + I);
    expert.down.bias.assign(at(down_bias, H), at(down_bias, H) + H);
    expert.activation = m.activation;
  }
  return experts;
}

// Layer p's experts: GGUF's per-expert matrices, else the MXFP4 pairs when the checkpoint has them,
// else transformers' plain stacked tensors.
std::vector<ExpertWeights> load_experts(const std::string& p, const ModelConfig& c, const ExpertShape& m,
                                        const TensorSource& source, const WeightLoader& w, const LoadOptions& options,
                                        Backend& backend) {
  const int E = m.experts, H = c.hidden_size, I = c.intermediate_size;
  const std::string x = p + "mlp.experts.";
  const std::vector<float> down_bias = w.tensor(x + "down_proj_bias", {E, H});
  if (w.has(expert_name(x, 0, "gate_proj"))) return split_experts(x, c, m, w, down_bias);
  const std::vector<float> gate_up_bias = w.tensor(x + "gate_up_proj_bias", {E, 2 * I});
  auto interleaved = [I](int r) { return gate_up_row(r, I); };
  auto same = [](int r) { return r; };
  const bool mxfp4 = w.has(x + "gate_up_proj_blocks");
  if (mxfp4 && (H % 32 != 0 || I % 32 != 0))
    fail("{}: MXFP4 experts need hidden_size ({}) and intermediate_size ({}) multiples of 32", source.describe(), H, I);
  TensorView gate_up, down, gate_up_scales, down_scales;
  if (mxfp4) {
    gate_up = stacked(source, x + "gate_up_proj_blocks", {E, 2 * I, H / 32, 16});
    gate_up_scales = stacked(source, x + "gate_up_proj_scales", {E, 2 * I, H / 32});
    down = stacked(source, x + "down_proj_blocks", {E, H, I / 32, 16});
    down_scales = stacked(source, x + "down_proj_scales", {E, H, I / 32});
    for (const TensorView* v : {&gate_up, &gate_up_scales, &down, &down_scales})
      if (v->dtype != DType::U8) fail("{}: MXFP4 blocks and scales must be U8, found {}", v->origin, dtype_name(v->dtype));
  } else {
    gate_up = stacked(source, x + "gate_up_proj", {E, H, 2 * I});
    down = stacked(source, x + "down_proj", {E, I, H});
  }
  std::vector<ExpertWeights> experts(E);
  for (int e = 0; e < E; ++e) {
    ExpertWeights& expert = experts[e];
    if (mxfp4) {
      expert.gate_up = mxfp4_expert(gate_up, gate_up_scales, e, 2 * I, H, interleaved, backend, options);
      expert.down = mxfp4_expert(down, down_scales, e, H, I, same, backend, options);
    } else {
      expert.gate_up = transposed_expert(gate_up, e, H, 2 * I, interleaved, backend, options);
      expert.down = transposed_expert(down, e, I, H, same, backend, options);
    }
    expert.gate_up.bias.resize(2 * I);
    for (int r = 0; r < 2 * I; ++r) expert.gate_up.bias[r] = gate_up_bias[static_cast<std::size_t>(e) * 2 * I + gate_up_row(r, I)];
    expert.down.bias.assign(down_bias.begin() + static_cast<std::ptrdiff_t>(e) * H, down_bias.begin() + static_cast<std::ptrdiff_t>(e + 1) * H);
    expert.activation = m.activation;
  }
  return experts;
}

TransformerWeights load(const ModelConfig& c, const json& raw, const TensorSource& source, const LoadOptions& options,
                        Backend& backend) {
  const json j = with_defaults(raw);
  const ExpertShape m = expert_shape(j, "config.json");
  const bool bias = config_bool_or(j, "attention_bias", true, "config.json");
  WeightLoader w(source, backend, options);
  const int H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  TransformerWeights t;
  load_rope(t, c, j);
  w.embedding("model.embed_tokens.weight", c.vocab_size, H, t, c.tie_word_embeddings);
  auto bias_name = [bias](const std::string& name) { return bias ? name : std::string(); };
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights L;
    L.norm1_weight = w.tensor(p + "input_layernorm.weight", {H});
    L.qkv = w.fuse_rows({w.linear(p + "self_attn.q_proj.weight", q, H, bias_name(p + "self_attn.q_proj.bias")),
                         w.linear(p + "self_attn.k_proj.weight", kv, H, bias_name(p + "self_attn.k_proj.bias")),
                         w.linear(p + "self_attn.v_proj.weight", kv, H, bias_name(p + "self_attn.v_proj.bias"))});
    L.out = w.linear(p + "self_attn.o_proj.weight", H, q, bias_name(p + "self_attn.o_proj.bias"));
    L.attention_sinks = w.tensor(p + "self_attn.sinks", {c.num_heads});
    L.norm2_weight = w.tensor(p + "post_attention_layernorm.weight", {H});
    // The router stays f32 (a top-k choice flips on small errors), with its bias.
    L.router.in = H;
    L.router.out = m.experts;
    L.router.weight = w.table(p + "mlp.router.weight", m.experts, H);
    L.router.bias = w.tensor(p + "mlp.router.bias", {m.experts});
    L.experts_per_token = m.per_token;
    // Softmax over the top-k logits equals the full softmax's top-k renormalised to sum 1.
    L.normalize_expert_weights = true;
    L.experts = load_experts(p, c, m, source, w, options, backend);
    t.layers.push_back(std::move(L));
  }
  t.final_norm_weight = w.tensor("model.norm.weight", {H});
  t.lm_head = c.tie_word_embeddings ? tied_head(t, c.vocab_size, H) : w.output("lm_head.weight", c.vocab_size, H);
  return t;
}

std::vector<TensorSpec> layout(const ModelConfig& c, const json& raw) {
  const json j = with_defaults(raw);
  const ExpertShape m = expert_shape(j, "config");
  const bool bias = config_bool_or(j, "attention_bias", true, "config");
  const int64_t H = c.hidden_size, I = c.intermediate_size, E = m.experts, q = c.num_heads * c.head_dim,
                kv = c.num_kv_heads * c.head_dim;
  std::vector<TensorSpec> specs{{"model.embed_tokens.weight", {c.vocab_size, H}}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {H}, Init::Ones});
    for (const auto& [name, rows] : {std::pair<const char*, int64_t>{"q_proj", q}, {"k_proj", kv}, {"v_proj", kv}}) {
      specs.push_back({p + "self_attn." + name + ".weight", {rows, H}});
      if (bias) specs.push_back({p + "self_attn." + name + ".bias", {rows}, Init::Zeros});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {H, q}});
    if (bias) specs.push_back({p + "self_attn.o_proj.bias", {H}, Init::Zeros});
    specs.push_back({p + "self_attn.sinks", {c.num_heads}});
    specs.push_back({p + "post_attention_layernorm.weight", {H}, Init::Ones});
    specs.push_back({p + "mlp.router.weight", {E, H}});
    specs.push_back({p + "mlp.router.bias", {E}});
    specs.push_back({p + "mlp.experts.gate_up_proj", {E, H, 2 * I}});
    specs.push_back({p + "mlp.experts.gate_up_proj_bias", {E, 2 * I}, Init::Zeros});
    specs.push_back({p + "mlp.experts.down_proj", {E, I, H}});
    specs.push_back({p + "mlp.experts.down_proj_bias", {E, H}, Init::Zeros});
  }
  specs.push_back({"model.norm.weight", {H}, Init::Ones});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, H}});
  return specs;
}

void forward(const TransformerWeights& w, ForwardStep& s) {
  embed_tokens(s, w);
  rope_table(s, w);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    norm(s, Norm::RMS, s.x, L.norm1_weight, L.norm1_bias, s.normed);
    attention(s, static_cast<int>(l), L, {.rope = true, .window = s.config.layer_windows.empty() ? 0 : s.config.layer_windows[l]});
    s.backend.add(s.x, s.proj);
    norm(s, Norm::RMS, s.x, L.norm2_weight, L.norm2_bias, s.normed);
    moe_mlp(s, L);
    s.backend.add(s.x, s.proj);
  }
  output_logits(s, w, Norm::RMS);
}

}  // namespace

const Architecture& gpt_oss_architecture() {
  static const Architecture arch{"gpt_oss", {"gpt_oss"}, {"GptOssForCausalLM"}, parse, load, layout, forward};
  return arch;
}

}  // namespace inferlab
