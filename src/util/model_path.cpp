#include "inferlab/util/model_path.h"

#include <cstdlib>
#include <fstream>
#include <vector>

#include "inferlab/util/error.h"

namespace fs = std::filesystem;

namespace inferlab {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::vector<fs::path> hub_cache_dirs() {
  std::vector<fs::path> caches;
  if (auto hub = env("HF_HUB_CACHE"); !hub.empty()) caches.emplace_back(hub);
  if (auto hub = env("HUGGINGFACE_HUB_CACHE"); !hub.empty()) caches.emplace_back(hub);
  if (auto home = env("HF_HOME"); !home.empty()) caches.push_back(fs::path(home) / "hub");
  if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) caches.push_back(fs::path(xdg) / "huggingface" / "hub");
  if (auto home = env("HOME"); !home.empty()) caches.push_back(fs::path(home) / ".cache" / "huggingface" / "hub");
  return caches;
}

namespace {

// models--Org--Name/refs/main names the snapshot transformers would load; otherwise take any snapshot.
fs::path snapshot_in(const fs::path& repo_dir) {
  std::ifstream ref(repo_dir / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision) && !revision.empty()) {
    fs::path snapshot = repo_dir / "snapshots" / revision;
    if (fs::is_directory(snapshot)) return snapshot;
  }
  std::error_code ec;
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(repo_dir / "snapshots", ec)) {
    if (!entry.is_directory()) continue;
    auto time = entry.last_write_time(ec);
    if (newest.empty() || time > newest_time) newest = entry.path(), newest_time = time;
  }
  return newest;
}

}  // namespace

bool looks_like_repo_id(const std::string& model) {
  auto slash = model.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < model.size() &&
         model.find('/', slash + 1) == std::string::npos && model[0] != '.' && model[0] != '/';
}

std::string hub_repo_folder(const std::string& repo_id) {
  auto slash = repo_id.find('/');
  return "models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1);
}

fs::path find_cached_snapshot(const std::string& repo_id) {
  if (!looks_like_repo_id(repo_id)) return {};
  for (const auto& cache : hub_cache_dirs()) {
    fs::path repo_dir = cache / hub_repo_folder(repo_id);
    if (!fs::is_directory(repo_dir / "snapshots")) continue;
    if (auto snapshot = snapshot_in(repo_dir); !snapshot.empty()) return snapshot;
  }
  return {};
}

fs::path resolve_model_path(const std::string& model) {
  if (model.empty()) fail("no model given: pass a model folder or a Hugging Face repo id such as Qwen/Qwen2.5-0.5B-Instruct");
  fs::path local(model);
  if (fs::is_directory(local)) return local;
  if (fs::exists(local) && fs::is_regular_file(local)) return local;  // single-file formats (llama2.c .bin, GGUF)

  std::vector<std::string> searched{fs::absolute(local).string()};
  bool repo_id = looks_like_repo_id(model);
  if (repo_id) {
    if (auto snapshot = find_cached_snapshot(model); !snapshot.empty()) return snapshot;
    for (const auto& cache : hub_cache_dirs()) searched.push_back((cache / hub_repo_folder(model) / "snapshots").string());
  }
  std::string list;
  for (const auto& path : searched) list += "\n  " + path;
  fail("model '{}' not found; searched:{}{}", model, list,
       repo_id ? fmt::format("\n(`inferlab pull {}` downloads it into the Hugging Face cache)", model) : "");
}

fs::path default_model_path() { return fs::path(INFERLAB_DEFAULT_MODEL); }

}  // namespace inferlab
