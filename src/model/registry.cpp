// Model::load: find the format and architecture of a model folder and build the network.
// Adding an architecture: write src/model/arch/<name>.cpp returning an Architecture, list it here.
#include <algorithm>
#include <optional>

#include "inferlab/util/error.h"
#include "inferlab/backend/backend.h"
#include "inferlab/loading/llama2c.h"
#include "inferlab/loading/json_config.h"
#include "inferlab/util/model_path.h"
#include "model/gguf_model.h"
#include "model/transformer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {
namespace {

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all{&gpt2_architecture(), &qwen2_architecture(), &qwen3_architecture(),
                                                    &llama_architecture(), &mistral_architecture(), &bert_architecture(),
                                                    &qwen3_moe_architecture(), &gpt_oss_architecture()};
  return all;
}

std::string supported_list() {
  std::string s;
  for (const auto* a : architectures()) s += (s.empty() ? "" : ", ") + a->name;
  return s;
}

// What a model argument points at, once resolved.
struct ModelFiles {
  fs::path folder;
  fs::path llama2c;  // set for a llama2.c checkpoint
  fs::path gguf;     // set for a GGUF model file
};

ModelFiles locate(const std::string& model) {
  fs::path path = resolve_model_path(model);
  if (fs::is_regular_file(path)) {
    if (path.filename() == "config.json") return {path.parent_path(), {}, {}};
    if (is_gguf_file(path)) return {path.parent_path(), {}, path};
    if (!looks_like_llama2c(path))
      fail("{} is neither a model folder, a config.json, a GGUF file nor a llama2.c checkpoint (its size does not match a "
           "llama2.c header)",
           path.string());
    return {path.parent_path(), path, {}};
  }
  if (fs::exists(path / "config.json")) return {path, {}, {}};
  std::vector<fs::path> bins;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.path().extension() == ".bin" && looks_like_llama2c(entry.path())) bins.push_back(entry.path());
  if (bins.size() == 1) return {path, bins[0], {}};
  fail("{} has no config.json{}", path.string(),
       bins.empty() ? " (and no llama2.c .bin checkpoint)" : " and several llama2.c checkpoints: pass one file");
}

void read_special_ids(ModelConfig& config, const json& raw, const fs::path& folder) {
  const std::string where = (folder / "config.json").string();
  config.eos_token_ids = token_id_list(raw.value("eos_token_id", json()), "eos_token_id", where);
  auto bos = token_id_list(raw.value("bos_token_id", json()), "bos_token_id", where);
  if (!bos.empty()) config.bos_token_id = bos[0];
  const fs::path generation = folder / "generation_config.json";
  if (fs::exists(generation)) {
    json g = read_json_file(generation);
    if (g.contains("eos_token_id")) config.eos_token_ids = token_id_list(g["eos_token_id"], "eos_token_id", generation.string());
    if (g.contains("bos_token_id")) {
      auto ids = token_id_list(g["bos_token_id"], "bos_token_id", generation.string());
      if (!ids.empty()) config.bos_token_id = ids[0];
    }
  }
}

// sentence-transformers' modules.json: a Pooling module (its config.json's pooling_mode_*) and a
// Normalize module or none. A folder without it keeps the architecture's default pooling.
void read_sentence_transformers_pooling(ModelConfig& config, const fs::path& folder) {
  const fs::path modules_file = folder / "modules.json";
  if (!fs::exists(modules_file)) return;
  const std::string where = modules_file.string();
  const json modules = read_json_file(modules_file);
  if (!modules.is_array()) fail("{}: must be a list of modules", where);
  bool normalize = false;
  std::optional<EmbeddingPooling::Kind> kind;
  for (const json& module : modules) {
    if (!module.is_object() || !module.contains("type") || !module["type"].is_string())
      fail("{}: each module needs a \"type\" string", where);
    const std::string type = module["type"].get<std::string>();
    if (type == "sentence_transformers.models.Normalize") normalize = true;
    if (type != "sentence_transformers.models.Pooling") continue;
    const fs::path pooling_file = folder / module.value("path", std::string()) / "config.json";
    const json pooling = read_json_file(pooling_file);
    std::vector<std::string> modes;
    for (const char* mode : {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                             "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"})
      if (config_bool_or(pooling, mode, false, pooling_file.string())) modes.emplace_back(mode);
    if (modes.size() != 1)
      fail("{}: {} pooling modes are on; one of pooling_mode_cls_token, pooling_mode_mean_tokens, pooling_mode_lasttoken "
           "is supported",
           pooling_file.string(), modes.size());
    if (modes[0] == "pooling_mode_cls_token") kind = EmbeddingPooling::Kind::cls;
    else if (modes[0] == "pooling_mode_mean_tokens") kind = EmbeddingPooling::Kind::mean;
    else if (modes[0] == "pooling_mode_lasttoken") kind = EmbeddingPooling::Kind::last;
    else fail("{}: {} is not supported (cls, mean or last token)", pooling_file.string(), modes[0]);
  }
  if (!kind) fail("{}: no sentence_transformers.models.Pooling module", where);
  config.pooling = {*kind, normalize};
  const fs::path limits = folder / "sentence_bert_config.json";
  if (fs::exists(limits)) {
    const json j = read_json_file(limits);
    if (j.contains("max_seq_length")) config.max_seq_length = config_int(j, "max_seq_length", limits.string());
    // Inputs are refused beyond this, where sentence-transformers cuts them silently: an embedding
    // of part of a text returned as if of all of it is the lost data a client cannot see.
  }
}

// An embedding GGUF's <arch>.pooling_type (llama.cpp's: 0 none, 1 mean, 2 cls, 3 last, 4 rank),
// normalized as llama-server answers /v1/embeddings; none or 0 keeps the architecture's default.
void read_gguf_pooling(ModelConfig& config, const json& raw, const std::string& where) {
  if (!raw.contains("gguf_pooling_type")) return;
  const int type = raw["gguf_pooling_type"].get<int>();
  if (type == 0) return;
  if (type == 4) fail("{}: pooling_type 4 (rank: a reranker's score) is not an embedding; not supported", where);
  const EmbeddingPooling::Kind kinds[] = {EmbeddingPooling::Kind::mean, EmbeddingPooling::Kind::cls, EmbeddingPooling::Kind::last};
  config.pooling = {kinds[type - 1], true};
}

struct ParsedConfig {
  json raw;
  const Architecture* arch;
  ModelConfig config;
  std::unique_ptr<TensorSource> gguf_tensors;  // GGUF only
};

ParsedConfig parse_config(const ModelFiles& files) {
  ParsedConfig p;
  std::string where;
  if (!files.gguf.empty()) {
    GgufModel gguf = open_gguf_model(files.gguf);
    where = files.gguf.string();
    p.raw = std::move(gguf.config);
    p.gguf_tensors = std::move(gguf.tensors);
    p.arch = &find_architecture(p.raw, where);
    p.config = p.arch->parse_config(p.raw, where);
    p.config.eos_token_ids = token_id_list(p.raw.value("eos_token_id", json()), "tokenizer.ggml.eos_token_id", where);
    read_gguf_pooling(p.config, p.raw, where);
    if (p.raw.contains("bos_token_id")) p.config.bos_token_id = p.raw["bos_token_id"].get<int>();
    return p;
  }
  if (!files.llama2c.empty()) {
    p.raw = read_llama2c_config(files.llama2c);
    where = files.llama2c.string();
  } else {
    where = (files.folder / "config.json").string();
    p.raw = read_json_file(files.folder / "config.json");
    if (!p.raw.is_object()) fail("{}: must be a JSON object", where);
  }
  p.arch = &find_architecture(p.raw, where);
  p.config = p.arch->parse_config(p.raw, where);
  if (files.llama2c.empty()) {
    read_special_ids(p.config, p.raw, files.folder);
    read_sentence_transformers_pooling(p.config, files.folder);
  }
  else p.config.bos_token_id = 1;
  return p;
}

}  // namespace

const Architecture& find_architecture(const json& config, const std::string& where) {
  if (config.contains("model_type") && config["model_type"].is_string()) {
    const std::string type = config["model_type"].get<std::string>();
    for (const auto* a : architectures())
      if (std::find(a->model_types.begin(), a->model_types.end(), type) != a->model_types.end()) return *a;
    fail("{}: unknown model_type '{}' (supported: {})", where, type, supported_list());
  }
  if (config.contains("architectures") && config["architectures"].is_array()) {
    for (const auto& cls : config["architectures"])
      for (const auto* a : architectures())
        if (cls.is_string() && std::find(a->classes.begin(), a->classes.end(), cls.get<std::string>()) != a->classes.end())
          return *a;
    fail("{}: unknown architectures {} (supported model types: {})", where, config["architectures"].dump(), supported_list());
  }
  fail("{}: missing key \"model_type\" (supported: {})", where, supported_list());
}

const char* to_string(EmbeddingPooling::Kind kind) {
  switch (kind) {
    case EmbeddingPooling::Kind::mean: return "mean";
    case EmbeddingPooling::Kind::cls: return "cls";
    case EmbeddingPooling::Kind::last: return "last";
  }
  return "?";
}

int max_input_tokens(const ModelConfig& config) {
  if (config.max_seq_length > 0 && (config.max_position_embeddings <= 0 || config.max_seq_length < config.max_position_embeddings))
    return config.max_seq_length;
  return config.max_position_embeddings;
}

ModelConfig read_model_config(const std::string& model) { return parse_config(locate(model)).config; }

std::unique_ptr<Model> Model::load(const std::string& model, const LoadOptions& options) {
  const ModelFiles files = locate(model);
  ParsedConfig parsed = parse_config(files);
  std::unique_ptr<Backend> backend = make_cpu_backend(options.threads);
  auto build = [&](const TensorSource& source, const fs::path& path) -> std::unique_ptr<Model> {
    auto weights = parsed.arch->load_weights(parsed.config, parsed.raw, source, options, *backend);
    return std::make_unique<TransformerModel>(parsed.config, *parsed.arch, std::move(weights), std::move(backend), path);
  };
  if (parsed.gguf_tensors) return build(*parsed.gguf_tensors, files.gguf);
  if (!files.llama2c.empty()) return build(*read_llama2c_weights(files.llama2c), files.llama2c);
  return build(*open_safetensors_folder(files.folder), files.folder);
}

}  // namespace inferlab
