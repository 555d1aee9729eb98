// llama2.c checkpoints (karpathy/llama2.c "legacy" export, version 0): 7 int32 header + fp32
// weights. Read as an HF Llama model: an equivalent config.json and tensors under HF names, with
// wq/wk rows permuted from llama2.c's interleaved RoPE pairs to HF's rotate_half layout (the
// permutation transformers' convert_llama_weights_to_hf applies).
#pragma once
#include <filesystem>
#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "inferlab/loading/safetensors.h"

namespace inferlab {

// True when the file is plausibly a llama2.c checkpoint (size matches its header).
bool looks_like_llama2c(const std::filesystem::path& file);
// Only the header -> config.json equivalent (model_type "llama", bos_token_id 1; no weights read).
nlohmann::json read_llama2c_config(const std::filesystem::path& file);
// The weights under HF names; Error when the file size disagrees with the header.
std::unique_ptr<MemoryTensorSource> read_llama2c_weights(const std::filesystem::path& file);

}  // namespace inferlab
