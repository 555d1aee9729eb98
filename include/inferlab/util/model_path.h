// Where a model lives: a local folder, or a Hugging Face repo id resolved from the local HF cache.
#pragma once
#include <filesystem>
#include <string>

namespace inferlab {

// "path/to/folder" -> that folder; "Org/Name" -> $HF_HOME/hub/models--Org--Name/snapshots/<rev>
// (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and ~/.cache/huggingface are honoured as transformers does).
// Throws Error naming every path searched when nothing is found.
std::filesystem::path resolve_model_path(const std::string& model);

// The model `inferlab serve` runs when no MODEL is given: SmolLM2-135M-Instruct as a Q4_1 GGUF,
// fetched by scripts/setup.
std::filesystem::path default_model_path();

}  // namespace inferlab
