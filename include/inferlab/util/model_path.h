// Where a model lives: a local folder, or a Hugging Face repo id resolved from the local HF cache.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace inferlab {

// "path/to/folder" -> that folder; "Org/Name" -> $HF_HOME/hub/models--Org--Name/snapshots/<rev>
// (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and ~/.cache/huggingface are honoured as transformers does).
// Throws Error naming every path searched when nothing is found.
std::filesystem::path resolve_model_path(const std::string& model);

// The model `inferlab serve` runs when no MODEL is given: SmolLM2-135M-Instruct as a Q4_1 GGUF,
// fetched by scripts/setup.
std::filesystem::path default_model_path();

// The Hugging Face caches searched, in order: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE (the old name),
// HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub. The first is where
// `inferlab pull` writes, as huggingface_hub does. Empty only when none of these variables is set.
std::vector<std::filesystem::path> hub_cache_dirs();

// "Org/Name" (one slash, not a path starting with . or /): what could be a hub repo id.
bool looks_like_repo_id(const std::string& model);

// "Org/Name" -> "models--Org--Name", the repo's folder in a hub cache.
std::string hub_repo_folder(const std::string& repo_id);

// The snapshot folder of a repo id in the first cache that has one (refs/main's, else the newest),
// or an empty path when no cache has it.
std::filesystem::path find_cached_snapshot(const std::string& repo_id);

}  // namespace inferlab
