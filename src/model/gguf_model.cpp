// GGUF -> the architectures' inputs. Metadata keys <arch>.* become config.json keys; tensors
// blk.N.attn_q.weight etc. are found under their HF names (model.layers.N.self_attn.q_proj.weight;
// gpt2: transformer.h.N.attn.c_attn.weight for the fused blk.N.attn_qkv.weight; bert:
// encoder.layer.N.attention.self.query.weight; gpt-oss: see gpt_oss_gguf_name).
// llama GGUFs store attn_q / attn_k rows permuted for ggml's interleaved RoPE (convert_hf_to_gguf
// permutes them); the rows are put back in HF order here (a row permutation: exact in any type).
#include "model/gguf_model.h"

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "inferlab/loading/gguf.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {
namespace {

// HF names inside model.layers.N. -> GGUF names inside blk.N.
const std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm", "attn_norm"},       {"self_attn.q_proj", "attn_q"},     {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},         {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},    {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},              {"mlp.down_proj", "ffn_down"},   {"mlp.gate", "ffn_gate_inp"},
};

// qwen3moe: expert E's matrix of layer L (model.layers.L.mlp.experts.E.gate_proj.weight) is slice E
// of the 3-D tensor blk.L.ffn_gate_exps.weight (ggml dims [cols, rows, experts]; rows of blocks
// along the first, so one expert is a contiguous run of bytes).
struct ExpertSlice {
  std::string stacked;  // GGUF name of the 3-D tensor
  int64_t expert = -1;
};

std::optional<ExpertSlice> expert_slice(const std::string& hf) {
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return std::nullopt;
  const std::size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string experts = ".mlp.experts.";
  if (hf.compare(dot, experts.size(), experts) != 0) return std::nullopt;
  const std::size_t number = dot + experts.size(), end = hf.find('.', number);
  if (end == std::string::npos || end == number) return std::nullopt;
  const std::string expert = hf.substr(number, end - number), rest = hf.substr(end + 1);
  if (expert.find_first_not_of("0123456789") != std::string::npos || expert.size() > 9) return std::nullopt;
  for (const char* matrix : {"gate", "up", "down"})
    if (rest == std::string(matrix) + "_proj.weight")
      return ExpertSlice{"blk." + layer + ".ffn_" + matrix + "_exps.weight", std::stoll(expert)};
  return std::nullopt;
}

// qwen2, qwen3, llama: HF name -> GGUF name ("" when it has none).
std::string llama_family_gguf_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const std::size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayerNames) {
    const std::string f = std::string(from) + ".";
    if (rest.rfind(f, 0) == 0) return "blk." + layer + "." + to + "." + rest.substr(f.size());
  }
  return "";
}

// gpt-oss (GGUF "gpt-oss", llama.cpp's openai-moe graph): the llama family's names but for the
// norm after attention (post_attention_norm, not ffn_norm), the sinks (blk.N.attn_sinks.weight), the
// router with its bias (ffn_gate_inp) and the experts' biases, stacked [experts][rows] per matrix
// (gate and up apart, as convert_hf_to_gguf.py splits transformers' interleaved gate_up_proj);
// gpt_oss.cpp asks for them as model.layers.N.mlp.experts.{gate,up,down}_proj_bias. The expert
// matrices themselves are the stacked ffn_{gate,up,down}_exps, sliced per expert (expert_slice).
std::string gpt_oss_gguf_name(const std::string& hf) {
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) == 0) {
    const std::size_t dot = hf.find('.', prefix.size());
    if (dot == std::string::npos) return "";
    const std::string layer = hf.substr(prefix.size(), dot - prefix.size()), rest = hf.substr(dot + 1);
    const std::pair<const char*, const char*> names[] = {
        {"self_attn.sinks", "attn_sinks.weight"},
        {"post_attention_layernorm.weight", "post_attention_norm.weight"},
        {"mlp.router.weight", "ffn_gate_inp.weight"},
        {"mlp.router.bias", "ffn_gate_inp.bias"},
        {"mlp.experts.gate_proj_bias", "ffn_gate_exps.bias"},
        {"mlp.experts.up_proj_bias", "ffn_up_exps.bias"},
        {"mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
    };
    for (const auto& [from, to] : names)
      if (rest == from) return "blk." + layer + "." + to;
    if (rest.rfind("post_attention_layernorm.", 0) == 0 || rest.rfind("mlp.", 0) == 0) return "";  // no ffn_norm / dense MLP
  }
  return llama_family_gguf_name(hf);
}

// GPT-2 (HF names with or without the "transformer." prefix, as gpt2.cpp asks for them) inside
// transformer.h.N. -> inside blk.N.; the Conv1D names stand for GGUF's linear [out][in] tensors.
const std::pair<const char*, const char*> kGpt2LayerNames[] = {
    {"ln_1", "attn_norm"}, {"attn.c_attn", "attn_qkv"}, {"attn.c_proj", "attn_output"},
    {"ln_2", "ffn_norm"},  {"mlp.c_fc", "ffn_up"},       {"mlp.c_proj", "ffn_down"},
};

std::string gpt2_gguf_name(const std::string& hf) {
  if (hf == "lm_head.weight") return "output.weight";
  const std::string name = hf.rfind("transformer.", 0) == 0 ? hf.substr(12) : hf;
  for (const auto& [from, to] : {std::pair{"wte.", "token_embd."}, std::pair{"wpe.", "position_embd."}, std::pair{"ln_f.", "output_norm."}})
    if (name.rfind(from, 0) == 0) return to + name.substr(std::strlen(from));
  if (name.rfind("h.", 0) != 0) return "";
  const std::size_t dot = name.find('.', 2);
  if (dot == std::string::npos) return "";
  const std::string layer = name.substr(2, dot - 2), rest = name.substr(dot + 1);
  for (const auto& [from, to] : kGpt2LayerNames) {
    const std::string f = std::string(from) + ".";
    if (rest.rfind(f, 0) == 0) return "blk." + layer + "." + to + "." + rest.substr(f.size());
  }
  return "";
}

// BERT (HF names with or without the "bert." prefix, as bert.cpp asks for them) inside
// encoder.layer.N. -> inside blk.N., as llama.cpp's converter names them.
const std::pair<const char*, const char*> kBertLayerNames[] = {
    {"attention.self.query", "attn_q"},          {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},          {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"}, {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},                {"output.LayerNorm", "layer_output_norm"},
};

std::string bert_gguf_name(const std::string& hf) {
  const std::string name = hf.rfind("bert.", 0) == 0 ? hf.substr(5) : hf;
  for (const auto& [from, to] : {std::pair{"embeddings.word_embeddings.", "token_embd."},
                                 std::pair{"embeddings.position_embeddings.", "position_embd."},
                                 std::pair{"embeddings.token_type_embeddings.", "token_types."},
                                 std::pair{"embeddings.LayerNorm.", "token_embd_norm."}})
    if (name.rfind(from, 0) == 0) return to + name.substr(std::strlen(from));
  const std::string prefix = "encoder.layer.";
  if (name.rfind(prefix, 0) != 0) return "";
  const std::size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string layer = name.substr(prefix.size(), dot - prefix.size()), rest = name.substr(dot + 1);
  for (const auto& [from, to] : kBertLayerNames) {
    const std::string f = std::string(from) + ".";
    if (rest.rfind(f, 0) == 0) return "blk." + layer + "." + to + "." + rest.substr(f.size());
  }
  return "";
}

using GgufNameOf = std::string (*)(const std::string& hf);

class GgufTensorSource : public TensorSource {
 public:
  GgufTensorSource(GgufFile gguf, GgufNameOf gguf_name, int heads, int kv_heads, bool permuted_qk)
      : gguf_(std::move(gguf)), gguf_name_(gguf_name), heads_(heads), kv_heads_(kv_heads), permuted_qk_(permuted_qk) {}

  std::optional<TensorView> find(const std::string& name) const override {
    if (const auto slice = expert_slice(name)) return expert(*slice);
    const std::string g = gguf_name_(name);
    const GgufTensorInfo* info = g.empty() ? nullptr : gguf_.tensor(g);
    if (!info) return std::nullopt;
    return view_of(*info, g);
  }

  // One expert's [rows][cols] out of the stacked [experts][rows][cols] tensor.
  std::optional<TensorView> expert(const ExpertSlice& slice) const {
    const GgufTensorInfo* info = gguf_.tensor(slice.stacked);
    if (!info) return std::nullopt;
    if (info->dims.size() != 3)
      fail("GGUF file {}: tensor {} has {} dimensions; stacked experts have 3", gguf_.path.string(), slice.stacked, info->dims.size());
    const int64_t experts = static_cast<int64_t>(info->dims[2]);
    if (slice.expert >= experts) return std::nullopt;
    TensorView view = view_of(*info, slice.stacked);
    view.shape.erase(view.shape.begin());
    view.bytes /= static_cast<std::size_t>(experts);
    view.data = static_cast<const uint8_t*>(view.data) + view.bytes * static_cast<std::size_t>(slice.expert);
    view.origin = fmt::format("{} ({} expert {})", gguf_.path.string(), slice.stacked, slice.expert);
    return view;
  }

  TensorView view_of(const GgufTensorInfo& tensor, const std::string& g) const {
    const GgufTensorInfo* info = &tensor;
    const char* type_name = fast::ggml_type_name(info->type);
    if (!fast::ggml_block(info->type))
      fail("GGUF file {}: tensor {} has type {}, which inferlab does not run (supported: {})", gguf_.path.string(), g,
           type_name, fast::ggml_supported_types());
    TensorView view;
    for (auto it = info->dims.rbegin(); it != info->dims.rend(); ++it) view.shape.push_back(static_cast<int64_t>(*it));
    view.data = gguf_.data(*info);
    view.bytes = info->bytes;
    view.origin = gguf_.path.string() + " (" + g + ")";
    if (info->type == fast::kGgmlF32) view.dtype = DType::F32;
    else if (info->type == fast::kGgmlBF16) view.dtype = DType::BF16;
    else view.ggml_type = static_cast<int>(info->type);
    const bool q = g.find(".attn_q.") != std::string::npos, k = g.find(".attn_k.") != std::string::npos;
    if (permuted_qk_ && (q || k)) return unpermute(view, g, q ? heads_ : kv_heads_);
    return view;
  }
  std::string describe() const override { return gguf_.path.string(); }
  // Named as the file names it, with the name the architecture asked for beside it.
  std::string missing(const std::string& name) const override {
    if (const auto slice = expert_slice(name)) {
      const GgufTensorInfo* info = gguf_.tensor(slice->stacked);
      if (!info) return fmt::format("GGUF file {}: missing tensor {} ({})", gguf_.path.string(), slice->stacked, name);
      return fmt::format("GGUF file {}: tensor {} holds {} experts, not expert {} ({})", gguf_.path.string(), slice->stacked,
                         info->dims.size() == 3 ? info->dims[2] : 0, slice->expert, name);
    }
    const std::string g = gguf_name_(name);
    if (g.empty()) return TensorSource::missing(name);
    return fmt::format("GGUF file {}: missing tensor {} ({})", gguf_.path.string(), g, name);
  }

 private:
  // GGUF row (h, j, i) holds HF row (h, i, j) for head h, half i, pair j: undone on a copy.
  TensorView unpermute(TensorView view, const std::string& name, int heads) const {
    const int64_t rows = view.shape.empty() ? 0 : view.shape[0];
    if (heads <= 0 || rows <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0)
      fail("GGUF file {}: tensor {} has {} rows, not {} heads of an even size", gguf_.path.string(), name, rows, heads);
    if (view.bytes == 0) return view;  // rows of no weights: the shape check names it
    const int64_t head_dim = rows / heads, half = head_dim / 2;
    const std::size_t row_bytes = view.bytes / static_cast<std::size_t>(rows);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& copy = copies_[name];
    copy.resize(view.bytes);
    const auto* src = static_cast<const uint8_t*>(view.data);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r / head_dim, i = (r % head_dim) / half, j = r % half;
      std::memcpy(copy.data() + r * row_bytes, src + (h * head_dim + 2 * j + i) * row_bytes, row_bytes);
    }
    view.data = copy.data();
    return view;
  }

  GgufFile gguf_;
  GgufNameOf gguf_name_;
  int heads_, kv_heads_;
  bool permuted_qk_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> copies_;
};

struct Metadata {
  const GgufFile& gguf;
  std::string arch;
  const json* find(const std::string& key) const { return gguf.find(arch + "." + key); }
  // Bounded so that a corrupt value is an error, not a huge allocation (real models: < 2^18).
  int64_t integer(const std::string& key, int64_t max = int64_t{1} << 20) const {
    const json* v = find(key);
    if (!v) fail("GGUF file {}: missing hyper-parameter {}.{}", gguf.path.string(), arch, key);
    if (!v->is_number_integer()) fail("GGUF file {}: hyper-parameter {}.{} must be an integer, found {}", gguf.path.string(), arch, key, v->dump());
    const int64_t value = v->get<int64_t>();
    if (value < 1 || value > max)
      fail("GGUF file {}: hyper-parameter {}.{} is {}, outside 1..{}", gguf.path.string(), arch, key, value, max);
    return value;
  }
  double number_or(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail("GGUF file {}: hyper-parameter {}.{} must be a number, found {}", gguf.path.string(), arch, key, v->dump());
    return v->get<double>();
  }
  double number(const std::string& key) const {
    if (!find(key)) fail("GGUF file {}: missing hyper-parameter {}.{}", gguf.path.string(), arch, key);
    return number_or(key, 0);
  }
};

// qwen2, qwen3, llama: <arch>.* -> the config.json keys their parsers read.
json llama_family_config(const Metadata& m) {
  const std::string where = m.gguf.path.string();
  json c;
  c["hidden_size"] = m.integer("embedding_length");
  c["num_hidden_layers"] = m.integer("block_count");
  c["num_attention_heads"] = m.integer("attention.head_count");
  c["num_key_value_heads"] = m.find("attention.head_count_kv") ? m.integer("attention.head_count_kv") : m.integer("attention.head_count");
  c["intermediate_size"] = m.integer("feed_forward_length");
  c["max_position_embeddings"] = m.integer("context_length", int64_t{1} << 30);
  c["rms_norm_eps"] = m.number("attention.layer_norm_rms_epsilon");
  c["rope_theta"] = m.number_or("rope.freq_base", 10000.0);
  if (m.find("attention.key_length")) c["head_dim"] = m.integer("attention.key_length");
  if (const json* scaling = m.find("rope.scaling.type"); scaling && scaling->is_string() && scaling->get<std::string>() != "none") {
    const std::string type = scaling->get<std::string>();
    if (type == "linear") {
      c["rope_scaling"] = {{"type", "linear"}, {"factor", m.number("rope.scaling.factor")}};
    } else if (type == "yarn") {
      // convert_hf_to_gguf.py writes the factor, the original context and beta_fast / beta_slow when
      // the HF config had them; into the rope_scaling transformers reads (the rest its defaults).
      c["rope_scaling"] = {{"rope_type", "yarn"},
                           {"factor", m.number("rope.scaling.factor")},
                           {"original_max_position_embeddings", m.integer("rope.scaling.original_context_length", int64_t{1} << 30)}};
      if (m.find("rope.scaling.yarn_beta_fast")) c["rope_scaling"]["beta_fast"] = m.number("rope.scaling.yarn_beta_fast");
      if (m.find("rope.scaling.yarn_beta_slow")) c["rope_scaling"]["beta_slow"] = m.number("rope.scaling.yarn_beta_slow");
      // Keys whose llama.cpp meaning has no transformers counterpart here: refused unless neutral.
      for (const auto& [key, neutral] : {std::pair<const char*, double>{"rope.scaling.attn_factor", 1.0},
                                         {"rope.scaling.yarn_attn_factor", 1.0},
                                         {"rope.scaling.yarn_ext_factor", 1.0},
                                         {"rope.scaling.yarn_log_multiplier", 0.0}})
        if (m.find(key) && m.number(key) != neutral)
          fail("GGUF file {}: {}.{} = {} is not supported with YaRN (only {})", where, m.arch, key, m.number(key), neutral);
    } else {
      fail("GGUF file {}: {}.rope.scaling.type '{}' is not supported (linear, yarn)", where, m.arch, type);
    }
  }
  if (m.gguf.tensor("rope_freqs.weight"))
    fail("GGUF file {}: tensor rope_freqs.weight (Llama 3.1-style RoPE scaling) is not supported", where);
  c["hidden_act"] = "silu";
  if (m.arch == "llama" || m.arch == "qwen3" || m.arch == "qwen3moe")
    c["attention_bias"] = m.gguf.tensor("blk.0.attn_q.bias") != nullptr;
  return c;
}

// qwen3moe: the llama family's keys plus the experts'. llama.cpp's qwen3moe graph makes every layer
// sparse and always renormalises the chosen experts' weights (Qwen3-MoE's norm_topk_prob true).
json qwen3moe_config(const Metadata& m) {
  json c = llama_family_config(m);
  c["model_type"] = "qwen3_moe";
  c["num_experts"] = m.integer("expert_count");
  c["num_experts_per_tok"] = m.integer("expert_used_count");
  c["moe_intermediate_size"] = m.integer("expert_feed_forward_length");
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = json::array();
  return c;
}

// gpt-oss: <arch>.* -> GptOssConfig's keys. llama.cpp's graph (openai-moe-iswa) fixes what the file
// does not say, and so does this: the sliding window on the even layers (its swa pattern 2, also
// GptOssConfig's default alternation), q/k/v/o biases, softmax over the chosen experts' router
// logits, the clamped SwiGLU with alpha 1.702 and limit 7. The experts' width is
// expert_feed_forward_length (llama.cpp's n_ff_exp). YaRN is read with transformers' truncate false,
// as every gpt-oss config.json sets it (llama.cpp rounds the correction range outward instead, a
// difference of a few rotary frequencies); a file without rope.scaling keys runs plain RoPE, as in
// llama.cpp, not GptOssConfig's default YaRN.
json gpt_oss_config(const Metadata& m) {
  const std::string where = m.gguf.path.string();
  json c = llama_family_config(m);
  c["model_type"] = "gpt_oss";
  if (!c.contains("head_dim")) c["head_dim"] = c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();  // llama.cpp's default, not GptOssConfig's 64
  c["intermediate_size"] = m.integer("expert_feed_forward_length");
  c["num_local_experts"] = m.integer("expert_count");
  c["num_experts_per_tok"] = m.integer("expert_used_count");
  c["sliding_window"] = m.integer("attention.sliding_window", int64_t{1} << 30);
  c["attention_bias"] = true;
  for (const char* bias : {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias", "blk.0.attn_output.bias"})
    if (!m.gguf.tensor(bias)) fail("GGUF file {}: missing tensor {} (llama.cpp's gpt-oss has q/k/v/o biases)", where, bias);
  c["swiglu_limit"] = 7.0;
  c["swiglu_alpha"] = 1.702;
  if (c.contains("rope_scaling")) c["rope_scaling"]["truncate"] = false;
  else c["rope_scaling"] = {{"rope_type", "default"}};
  return c;
}

// gpt2: gpt2.* -> GPT-2's config.json keys. llama.cpp's gpt2 uses the tanh GELU (gelu_new) and
// stores every matrix as a linear layer [out][in] (HF's Conv1D ones transposed), which
// "linear_weights" tells gpt2.cpp.
json gpt2_config(const Metadata& m) {
  const std::string where = m.gguf.path.string();
  json c;
  c["n_embd"] = m.integer("embedding_length");
  c["n_layer"] = m.integer("block_count");
  c["n_head"] = m.integer("attention.head_count");
  if (m.find("attention.head_count_kv") && m.integer("attention.head_count_kv") != c["n_head"].get<int64_t>())
    fail("GGUF file {}: gpt2.attention.head_count_kv {} differs from head_count {}; GPT-2 has no grouped-query attention",
         where, m.integer("attention.head_count_kv"), c["n_head"].get<int64_t>());
  c["n_inner"] = m.integer("feed_forward_length");
  c["n_positions"] = m.integer("context_length", int64_t{1} << 30);
  c["layer_norm_epsilon"] = m.number("attention.layer_norm_epsilon");
  c["activation_function"] = "gelu_new";
  c["linear_weights"] = true;
  return c;
}

// bert: bert.* -> BERT's config.json keys. llama.cpp's bert graph runs the exact-erf GELU and
// absolute positions, and says the pooling sentence-transformers configured (bert.pooling_type:
// 1 mean, 2 cls, 3 last token; carried as "gguf_pooling_type" for the registry).
json bert_config(const Metadata& m) {
  const std::string where = m.gguf.path.string();
  json c;
  c["hidden_size"] = m.integer("embedding_length");
  c["num_hidden_layers"] = m.integer("block_count");
  c["num_attention_heads"] = m.integer("attention.head_count");
  c["intermediate_size"] = m.integer("feed_forward_length");
  c["max_position_embeddings"] = m.integer("context_length", int64_t{1} << 30);
  c["layer_norm_eps"] = m.number("attention.layer_norm_epsilon");
  if (const json* causal = m.find("attention.causal"); causal && *causal != false)
    fail("GGUF file {}: bert.attention.causal is {}; a BERT encoder attends both ways (false)", where, causal->dump());
  const GgufTensorInfo* types = m.gguf.tensor("token_types.weight");
  if (!types || types->dims.size() != 2) fail("GGUF file {}: missing 2-D tensor token_types.weight", where);
  c["type_vocab_size"] = static_cast<int64_t>(types->dims[1]);
  if (m.gguf.tensor("blk.0.attn_qkv.weight"))
    fail("GGUF file {}: a fused blk.N.attn_qkv (nomic-bert / jina layouts) is not BERT's; bert needs attn_q, attn_k, attn_v", where);
  if (m.find("pooling_type")) {
    const json* pooling = m.find("pooling_type");
    if (!pooling->is_number_unsigned() || pooling->get<int64_t>() > 4)
      fail("GGUF file {}: bert.pooling_type must be 0..4, found {}", where, pooling->dump());
    c["gguf_pooling_type"] = *pooling;
  }
  c["hidden_act"] = "gelu";
  return c;
}

}  // namespace

bool is_gguf_file(const fs::path& file) {
  if (file.extension() == ".gguf") return true;
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufModel open_gguf_model(const fs::path& file) {
  GgufFile gguf = read_gguf(file);
  const std::string where = file.string();
  const json* arch_value = gguf.find("general.architecture");
  if (!arch_value) fail("GGUF file {}: missing general.architecture", where);
  if (!arch_value->is_string()) fail("GGUF file {}: general.architecture must be a string", where);
  const std::string arch = arch_value->get<std::string>();
  if (arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" && arch != "llama" && arch != "gpt2" && arch != "gpt-oss" &&
      arch != "bert")
    fail("GGUF file {}: architecture '{}' is not supported for GGUF model files (supported: qwen2, qwen3, qwen3moe, llama, "
         "gpt2, gpt-oss, bert)",
         where, arch);
  // The vocabulary (tokenizer.ggml.*) is the tokenizer's concern (Tokenizer::from_gguf reads byte-level
  // BPE and SentencePiece vocabularies and names any other); the weights do not depend on it.
  const Metadata m{gguf, arch};
  json c = arch == "gpt2"       ? gpt2_config(m)
           : arch == "qwen3moe" ? qwen3moe_config(m)
           : arch == "gpt-oss"  ? gpt_oss_config(m)
           : arch == "bert"     ? bert_config(m)
                                : llama_family_config(m);
  if (!c.contains("model_type")) c["model_type"] = arch;
  const GgufTensorInfo* embedding = gguf.tensor("token_embd.weight");
  if (!embedding || embedding->dims.size() != 2) fail("GGUF file {}: missing 2-D tensor token_embd.weight", where);
  if (!m.find("vocab_size") && (embedding->dims[1] < 1 || embedding->dims[1] > (uint64_t{1} << 24)))
    fail("GGUF file {}: token_embd.weight has {} rows, outside 1..2^24", where, embedding->dims[1]);
  c["vocab_size"] = m.find("vocab_size") ? m.integer("vocab_size", int64_t{1} << 24) : static_cast<int64_t>(embedding->dims[1]);
  c["tie_word_embeddings"] = gguf.tensor("output.weight") == nullptr;
  auto token_id = [&](const char* key) -> json {
    const json* v = gguf.find(key);
    if (!v) return nullptr;
    if (!v->is_number_unsigned()) fail("GGUF file {}: {} must be a token id, found {}", where, key, v->dump());
    return *v;
  };
  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
    if (json id = token_id(key); !id.is_null() && std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  if (!eos.empty()) c["eos_token_id"] = eos;
  if (json bos = token_id("tokenizer.ggml.bos_token_id"); !bos.is_null()) c["bos_token_id"] = bos;
  // the heads matter only to llama's q/k row order
  const int heads = c.value("num_attention_heads", 0), kv_heads = c.value("num_key_value_heads", 0);
  GgufModel model;
  model.config = std::move(c);
  const GgufNameOf names = arch == "gpt2" ? gpt2_gguf_name : arch == "gpt-oss" ? gpt_oss_gguf_name : arch == "bert" ? bert_gguf_name : llama_family_gguf_name;
  model.tensors = std::make_unique<GgufTensorSource>(std::move(gguf), names, heads, kv_heads, arch == "llama");
  return model;
}

}  // namespace inferlab
