// A GGUF model file as the architectures see a model folder: its hyper-parameters as the
// config.json keys they read, and its tensors under Hugging Face names (a TensorSource).
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "inferlab/loading/safetensors.h"

namespace inferlab {

// A .gguf file, or any file that starts with GGUF's magic.
bool is_gguf_file(const std::filesystem::path& file);

struct GgufModel {
  nlohmann::json config;  // HF config.json keys (model_type, hidden_size, ...) from the metadata
  std::unique_ptr<TensorSource> tensors;
};

// Throws Error naming the file and the missing or unsupported thing (architecture, hyper-parameter,
// tensor type). The vocabulary is read by Tokenizer::from_gguf, not here.
GgufModel open_gguf_model(const std::filesystem::path& file);

}  // namespace inferlab
