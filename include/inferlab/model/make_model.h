// Random-weight models in the exact HF layout (make-model): real shapes for benchmarks and tests
// without downloading anything.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/loading/safetensors.h"

namespace inferlab {

struct MakeModelOptions {
  DType dtype = DType::F32;
  uint64_t seed = 0;
  float init_std = 0.02f;
  std::optional<std::filesystem::path> tokenizer_dir;  // tokenizer files copied from here
  // Written as generation_config.json when set (a pointer keeps json out of this header).
  std::shared_ptr<const nlohmann::json> generation_config;
};

// Writes config.json, model.safetensors (deterministic random weights, HF names and shapes of
// the config's architecture), generation_config.json and tokenizer files.
void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        const MakeModelOptions& options);

// Named configs for make-model --preset: "demo", "qwen2.5-0.5b", "distilgpt2", "llama-tiny", "qwen3-tiny",
// "qwen3-0.6b", "mistral-tiny", "mistral-7b".
std::vector<std::string> model_preset_names();
// config.json and generation_config.json of a preset; Error listing the names when unknown.
std::pair<nlohmann::json, nlohmann::json> model_preset(const std::string& name);

}  // namespace inferlab
