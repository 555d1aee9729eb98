// Downloading a model repository into the Hugging Face cache, laid out as huggingface_hub writes it:
// {cache}/models--Org--Name/blobs/{etag}, snapshots/{commit}/{file} -> ../../blobs/{etag} (relative
// symlinks), refs/{revision} holding the commit. From the Hugging Face hub, a mirror (HF_ENDPOINT),
// or ModelScope's file API into the same layout.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace inferlab {

enum class HubSource { huggingface, modelscope };

struct PullOptions {
  std::string repo_id;                // "Org/Name"
  std::string revision;               // empty: "main" (Hugging Face) or "master" (ModelScope)
  std::vector<std::string> include;   // fnmatch globs on the repo paths ("*.json"); empty: every file
  HubSource source = HubSource::huggingface;
  std::string token;                  // empty: HF_TOKEN (Hugging Face) or MODELSCOPE_API_TOKEN
  std::string endpoint;               // empty: HF_ENDPOINT / MODELSCOPE_ENDPOINT, else the public hub
  bool offline = false;               // also forced by HF_HUB_OFFLINE=1: any pull then fails
  int parallel_files = 4;             // files transferred at once
};

struct PullResult {
  std::filesystem::path snapshot;     // the folder to load: snapshots/{commit}
  std::string commit;                 // the commit sha (ModelScope: the revision name)
  std::size_t files = 0;              // files in the snapshot after the pull (those matching --include)
  std::size_t downloaded = 0;         // of which were transferred now (the rest were already cached)
  std::uint64_t bytes = 0;            // bytes transferred now
};

// Lists the repo at the revision, downloads every matching file not yet cached (several at once,
// resuming a blobs/{etag}.incomplete left by an earlier run with a Range request), checks each LFS
// file's sha256 before keeping it, then links the snapshot. Throws Error naming the problem
// (repository or revision not found, authentication needed, sha256 mismatch, disk full, transfer
// cut: run again to resume).
PullResult pull(const PullOptions& options);

// True when HF_HUB_OFFLINE is set to 1 / true / yes / on (as huggingface_hub reads it).
bool hub_offline_from_env();

// What serve, generate and bench engine call before loading MODEL: a local folder or file, or a repo
// id already in the cache, is left alone; a repo id not cached is pulled from the Hugging Face hub
// (every file at "main"), unless `offline` or HF_HUB_OFFLINE forbids it, which fails saying so.
void pull_if_missing(const std::string& model, bool offline);

}  // namespace inferlab
