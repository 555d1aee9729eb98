// Model folders on disk: reading config.json / generation_config.json into a ModelConfig, and
// writing random-weight models in the exact HF layout (make-model).
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/model.h"
#include "inferlab/safetensors.h"

namespace inferlab {

// Parses a JSON file; Error names the file on a missing file or bad JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);

// config.json keys with errors that name the key and the file.
int config_int(const nlohmann::json& config, const std::string& key, const std::string& where);
int config_int_or(const nlohmann::json& config, const std::string& key, int fallback, const std::string& where);
double config_double_or(const nlohmann::json& config, const std::string& key, double fallback, const std::string& where);
bool config_bool_or(const nlohmann::json& config, const std::string& key, bool fallback, const std::string& where);
// An eos/bos field: int or list of ints (null: empty).
std::vector<int> token_id_list(const nlohmann::json& value, const std::string& key, const std::string& where);

// A model folder (or its config.json, or a llama2.c .bin) -> its config, weights not read.
// eos ids come from generation_config.json when present.
ModelConfig read_model_config(const std::string& model);

// The architecture-independent part of a config for KV sizing: layers, kv heads, head_dim.
struct KVShape {
  int layers = 0, kv_heads = 0, head_dim = 0;
};

struct MakeModelOptions {
  DType dtype = DType::F32;
  uint64_t seed = 0;
  float init_std = 0.02f;
  std::optional<std::filesystem::path> tokenizer_dir;  // tokenizer files copied from here
  std::optional<nlohmann::json> generation_config;     // written as generation_config.json
};

// Writes config.json, model.safetensors (deterministic random weights, HF names and shapes of
// the config's architecture), generation_config.json and tokenizer files.
void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        const MakeModelOptions& options);

// Named configs for make-model --preset: "demo", "qwen2.5-0.5b", "distilgpt2", "llama-tiny".
std::vector<std::string> model_preset_names();
// config.json and generation_config.json of a preset; Error listing the names when unknown.
std::pair<nlohmann::json, nlohmann::json> model_preset(const std::string& name);

}  // namespace inferlab
