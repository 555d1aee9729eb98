#include "inferlab/hub/pull.h"

#include <fnmatch.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "hub/http.h"
#include "inferlab/util/error.h"
#include "inferlab/util/model_path.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace inferlab {
namespace {

using hub::Download;
using hub::DownloadOutcome;
using hub::HttpResponse;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool env_true(const char* name) {
  std::string value = env(name);
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  return value == "1" || value == "true" || value == "yes" || value == "on";
}

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string header(const std::map<std::string, std::string>& headers, const std::string& name) {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

// The token as huggingface_hub finds it: HF_TOKEN, else the file `huggingface-cli login` wrote.
std::string hugging_face_token() {
  if (auto token = env("HF_TOKEN"); !token.empty()) return token;
  fs::path file = env("HF_TOKEN_PATH");
  if (file.empty()) {
    if (auto home = env("HF_HOME"); !home.empty()) file = fs::path(home) / "token";
    else if (auto xdg = env("XDG_CACHE_HOME"); !xdg.empty()) file = fs::path(xdg) / "huggingface" / "token";
    else if (auto user = env("HOME"); !user.empty()) file = fs::path(user) / ".cache" / "huggingface" / "token";
  }
  std::ifstream in(file);
  std::string token;
  if (in) std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

// Each segment of a repo path percent-encoded, the slashes kept.
std::string escape_path(const std::string& path) {
  std::string escaped;
  std::size_t start = 0;
  while (true) {
    auto slash = path.find('/', start);
    escaped += hub::url_escape(path.substr(start, slash - start));
    if (slash == std::string::npos) break;
    escaped += '/';
    start = slash + 1;
  }
  return escaped;
}

// A path from the server becomes a path under snapshots/: refuse anything that could leave it.
void check_repo_path(const std::string& path) {
  bool bad = path.empty() || path.front() == '/' || path.find('\\') != std::string::npos || path.find('\0') != std::string::npos;
  for (const auto& part : fs::path(path)) bad = bad || part == ".." || part == "." || part.empty();
  if (bad) fail("the hub listed a file named '{}', which is not a safe relative path: refusing to write it", path);
}

void check_blob_name(const std::string& name, const std::string& file) {
  bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
  if (!ok || name.front() == '.') fail("the hub's ETag for {} is '{}', which cannot name a blob file", file, name);
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// huggingface_hub's allow_patterns: fnmatch without FNM_PATHNAME ('*' crosses '/'); "dir/" means "dir/*".
bool matches_any(const std::string& path, const std::vector<std::string>& globs) {
  if (globs.empty()) return true;
  for (std::string glob : globs) {
    if (!glob.empty() && glob.back() == '/') glob += '*';
    if (fnmatch(glob.c_str(), path.c_str(), 0) == 0) return true;
  }
  return false;
}

std::string sha256_of_file(const fs::path& file) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) fail("OpenSSL could not start a sha256");
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot read {} to check its sha256", file.string());
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(context.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) fail("error reading {} to check its sha256", file.string());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string megabytes(std::uint64_t bytes) { return fmt::format("{:.1f} MB", static_cast<double>(bytes) / 1e6); }

// Written to a sibling then renamed, so a reader never sees half a file.
void write_file_atomically(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  fs::path temporary = file;
  temporary += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) fail("cannot write {}: {}", temporary.string(), std::strerror(errno));
  }
  fs::rename(temporary, file);
}

// What a pull must bring into the cache for one repo file.
struct PlannedFile {
  std::string path;                  // in the repo ("sub/dir/file.json")
  std::string blob;                  // blobs/ file name: the ETag without quotes, or ModelScope's sha256
  std::string sha256;                // checked before the blob is kept; empty: not checked
  std::uint64_t size = 0;            // 0: unknown
  std::string url;                   // GET (redirects followed)
  std::vector<std::string> headers;
};

// Where the files of one revision go, and what names it.
struct Plan {
  fs::path repo_dir;                 // {cache}/models--Org--Name
  std::string snapshot;              // snapshots/ folder: the commit sha (ModelScope: the revision)
  std::string ref;                   // refs/ file to write with `snapshot` inside; empty: none
  std::size_t matching = 0;          // files of the revision that --include selects
  std::vector<PlannedFile> missing;  // those not yet in the snapshot
};

// One source's way of naming the repo in errors and turning its error answers into words.
struct Failure {
  std::string repo, revision, endpoint;
  bool has_token = false;
  std::string token_hint;  // "set HF_TOKEN (or pass --token)"
};

[[noreturn]] void fail_for_status(const Failure& f, long status, const std::map<std::string, std::string>& headers,
                                  const std::string& body, const std::string& url, const std::string& file = "") {
  std::string code = header(headers, "x-error-code");
  std::string message = header(headers, "x-error-message");
  if (code == "RevisionNotFound") fail("revision {} not found in repository {} on {}", f.revision, f.repo, f.endpoint);
  if (code == "EntryNotFound") fail("file {} not found in repository {} at revision {}", file, f.repo, f.revision);
  if (code == "GatedRepo" || ((status == 401 || status == 403) && code != "RepoNotFound")) {
    if (!f.has_token)
      fail("repository {} on {} needs authentication (HTTP {}{}): it is gated or private; {} with a token of an "
           "account that has access",
           f.repo, f.endpoint, status, code.empty() ? "" : ", " + code, f.token_hint);
    fail("repository {} on {} refused the token given (HTTP {}{}): the token's account has no access yet (for a gated "
         "repository, accept its conditions at {}/{})",
         f.repo, f.endpoint, status, code.empty() ? "" : ", " + code, f.endpoint, f.repo);
  }
  if (status == 404 || code == "RepoNotFound")
    fail("repository {} not found on {}{}", f.repo, f.endpoint,
         f.has_token ? "" : " (if it is private, " + f.token_hint + ")");
  std::string detail = !message.empty() ? message : body.substr(0, 300);
  fail("{} answered HTTP {} for {}{}{}", f.endpoint, status, url, detail.empty() ? "" : ": ", detail);
}

std::vector<std::string> auth_headers(const std::string& token) {
  if (token.empty()) return {};
  return {"Authorization: Bearer " + token};
}

json parse_json(const HttpResponse& response, const std::string& what) {
  try {
    return json::parse(response.body);
  } catch (const json::exception& e) {
    fail("{} from {} is not JSON ({}): is the endpoint a model hub?", what, response.url, e.what());
  }
}

// '"abc"' or 'W/"abc"' -> 'abc', as huggingface_hub names blobs.
std::string normalized_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
  return etag;
}

// A Location header against the URL that answered it.
std::string absolute_url(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  if (!location.empty() && location.front() == '/') return hub::url_origin(base) + location;
  std::string directory = base.substr(0, base.find('?'));
  return directory.substr(0, directory.rfind('/') + 1) + location;
}

// --- Hugging Face (and mirrors): the revision API, then a HEAD per missing file ---------------------

Plan plan_hugging_face(const PullOptions& options, const Failure& failure, const std::string& token,
                       const fs::path& repo_dir) {
  const std::string& revision = failure.revision;
  const std::string& endpoint = failure.endpoint;
  const std::string info_url =
      fmt::format("{}/api/models/{}/revision/{}", endpoint, options.repo_id, hub::url_escape(revision));
  HttpResponse info = hub::http_request("GET", info_url, auth_headers(token), true);
  if (info.status != 200) fail_for_status(failure, info.status, info.headers, info.body, info_url);
  json doc = parse_json(info, "the repository listing");
  if (!doc.contains("sha") || !doc["sha"].is_string() || !doc.contains("siblings") || !doc["siblings"].is_array())
    fail("the repository listing from {} has no 'sha' or 'siblings': is {} a Hugging Face hub?", info_url, endpoint);

  Plan plan;
  plan.repo_dir = repo_dir;
  plan.snapshot = doc["sha"].get<std::string>();
  check_blob_name(plan.snapshot, "the commit");
  if (revision != plan.snapshot) plan.ref = revision;
  std::vector<std::string> paths;
  for (const auto& sibling : doc["siblings"])
    if (sibling.contains("rfilename") && sibling["rfilename"].is_string()) paths.push_back(sibling["rfilename"].get<std::string>());
  std::vector<std::string> headers = auth_headers(token);
  headers.push_back("Accept-Encoding: identity");  // Content-Length is then the file's size
  for (const auto& path : paths) {
    if (!matches_any(path, options.include)) continue;
    check_repo_path(path);
    ++plan.matching;
    if (fs::exists(repo_dir / "snapshots" / plan.snapshot / path)) continue;
    const std::string url =
        fmt::format("{}/{}/resolve/{}/{}", endpoint, options.repo_id, plan.snapshot, escape_path(path));
    // As huggingface_hub: redirects that stay on the hub (a renamed repo) are followed; one to another
    // origin (the LFS storage) is not, and its headers are the metadata, the storage's own headers
    // describing a different object.
    std::string head_url = url;
    HttpResponse head;
    bool redirect = false;
    for (int hops = 0;; ++hops) {
      head = hub::http_request("HEAD", head_url, headers, false);
      redirect = head.status >= 300 && head.status < 400 && !header(head.headers, "location").empty();
      if (!redirect) break;
      std::string target = absolute_url(head_url, header(head.headers, "location"));
      if (hub::url_origin(target) != hub::url_origin(head_url)) break;
      if (hops == 10) fail("{} redirected {} more than 10 times", endpoint, url);
      head_url = target;
    }
    if (head.status != 200 && !redirect) fail_for_status(failure, head.status, head.headers, "", head_url, path);
    const bool linked = !header(head.headers, "x-linked-etag").empty();
    std::string etag = normalized_etag(header(head.headers, linked ? "x-linked-etag" : "etag"));
    if (etag.empty()) fail("{} gave no ETag for {}: cannot name its blob (is {} a Hugging Face hub?)", endpoint, path, endpoint);
    check_blob_name(etag, path);
    std::string size_text = header(head.headers, "x-linked-size");
    if (size_text.empty() && !redirect) size_text = header(head.headers, "content-length");

    PlannedFile file;
    file.path = path;
    file.blob = etag;
    file.sha256 = linked && is_sha256_hex(etag) ? lower(etag) : "";  // an LFS file: its etag is its sha256
    file.size = size_text.empty() ? 0 : std::strtoull(size_text.c_str(), nullptr, 10);
    file.url = redirect ? absolute_url(head_url, header(head.headers, "location")) : head_url;
    // The token goes to the hub only, never to the storage a redirect points at.
    if (hub::url_origin(file.url) == hub::url_origin(endpoint)) file.headers = auth_headers(token);
    plan.missing.push_back(std::move(file));
  }
  return plan;
}

// --- ModelScope: one recursive listing with sizes and sha256s, files by query ------------------

Plan plan_modelscope(const PullOptions& options, const Failure& failure, const std::string& token,
                     const fs::path& repo_dir) {
  const std::string& revision = failure.revision;
  const std::string& endpoint = failure.endpoint;
  if (revision.find('/') != std::string::npos || revision == "." || revision == "..")
    fail("ModelScope revision '{}' cannot name a snapshot folder (no '/', '.' or '..')", revision);
  const std::string list_url = fmt::format("{}/api/v1/models/{}/repo/files?Revision={}&Recursive=true", endpoint,
                                           options.repo_id, hub::url_escape(revision));
  HttpResponse listing = hub::http_request("GET", list_url, auth_headers(token), true);
  json doc;
  if (listing.status == 200) doc = parse_json(listing, "the ModelScope file listing");
  bool listed = listing.status == 200 && doc.is_object() && doc.value("Code", 0) == 200 && doc.contains("Data") &&
                doc["Data"].contains("Files") && doc["Data"]["Files"].is_array();
  if (!listed) {
    if (listing.status == 401 || listing.status == 403)
      fail_for_status(failure, listing.status, listing.headers, listing.body, list_url);
    // A failed listing is a missing repository or a missing revision: the model's page tells which.
    const std::string model_url = fmt::format("{}/api/v1/models/{}", endpoint, options.repo_id);
    HttpResponse model = hub::http_request("GET", model_url, auth_headers(token), true);
    bool model_exists = false;
    if (model.status == 200) {
      try {
        model_exists = json::parse(model.body).value("Code", 0) == 200;
      } catch (const json::exception&) {
      }
    }
    if (!model_exists) fail("repository {} not found on {}", options.repo_id, endpoint);
    std::string message = listing.status == 200 && doc.is_object() ? doc.value("Message", std::string()) : "";
    fail("revision {} not found in repository {} on {}{}{}", revision, options.repo_id, endpoint,
         message.empty() ? "" : ": ", message);
  }

  Plan plan;
  plan.repo_dir = repo_dir;
  plan.snapshot = revision;
  plan.ref = revision;  // refs/master -> "master": huggingface_hub then finds the snapshot by its revision
  for (const auto& entry : doc["Data"]["Files"]) {
    if (!entry.is_object() || entry.value("Type", std::string()) != "blob") continue;  // "tree": a folder
    std::string path = entry.value("Path", std::string());
    if (!matches_any(path, options.include)) continue;
    check_repo_path(path);
    ++plan.matching;
    if (fs::exists(repo_dir / "snapshots" / plan.snapshot / path)) continue;
    PlannedFile file;
    file.path = path;
    file.sha256 = lower(entry.value("Sha256", std::string()));
    if (!is_sha256_hex(file.sha256))
      fail("the ModelScope listing gives no sha256 for {} in {}: cannot name or check its blob", path, options.repo_id);
    file.blob = file.sha256;
    file.size = entry.contains("Size") && entry["Size"].is_number_unsigned() ? entry["Size"].get<std::uint64_t>() : 0;
    file.url = fmt::format("{}/api/v1/models/{}/repo?Revision={}&FilePath={}", endpoint, options.repo_id,
                           hub::url_escape(revision), hub::url_escape(path));
    file.headers = auth_headers(token);
    plan.missing.push_back(std::move(file));
  }
  return plan;
}

// --- the progress line --------------------------------------------------------------------------

class Progress {
 public:
  Progress(std::string repo, const std::vector<Download>& downloads, std::uint64_t already)
      : repo_(std::move(repo)), downloads_(downloads), already_(already), tty_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {
    for (const auto& download : downloads) total_ += download.expected_size;
  }

  void update(std::uint64_t bytes_now, const DownloadOutcome* finished, std::size_t index) {
    if (finished) ++ended_;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string rate = seconds > 0.2 ? fmt::format("{:.1f} MB/s", static_cast<double>(bytes_now) / 1e6 / seconds) : "";
    if (tty_) {
      std::fprintf(stderr, "\r\x1b[K%s: %zu/%zu files, %s / %s %s", repo_.c_str(), ended_, downloads_.size(),
                   megabytes(already_ + bytes_now).c_str(), megabytes(total_).c_str(), rate.c_str());
      if (ended_ == downloads_.size() && finished) std::fputc('\n', stderr);
    } else if (finished) {
      // Not a terminal (a log, CI): one plain line per file, no carriage returns.
      std::fprintf(stderr, "%s: [%zu/%zu] %s %s%s\n", repo_.c_str(), ended_, downloads_.size(),
                   downloads_[index].label.c_str(), finished->complete ? "" : "failed: ",
                   finished->complete ? megabytes(finished->resumed_from + finished->transferred).c_str()
                                      : finished->error.c_str());
    }
    std::fflush(stderr);
  }

 private:
  std::string repo_;
  const std::vector<Download>& downloads_;
  std::uint64_t already_ = 0, total_ = 0;
  std::size_t ended_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

// Why a download did not end whole, in words a user can act on.
std::string download_problem(const PlannedFile& file, const Download& download, const DownloadOutcome& outcome,
                             const fs::path& cache, const Failure& failure) {
  std::error_code ec;
  std::uint64_t kept = fs::exists(download.partial, ec) ? fs::file_size(download.partial, ec) : 0;
  if (outcome.write_errno == ENOSPC || outcome.write_errno == EDQUOT || outcome.write_errno == EFBIG)
    return fmt::format("no space left writing {} into the cache {} ({}): free space there or point HF_HUB_CACHE at a "
                       "larger disk; the {} written are kept in {} and the next pull resumes from them",
                       file.path, cache.string(), std::strerror(outcome.write_errno), megabytes(kept),
                       download.partial.string());
  if (outcome.write_errno != 0)
    return fmt::format("cannot write {} ({})", download.partial.string(), std::strerror(outcome.write_errno));
  if (outcome.status == 416) {
    fs::remove(download.partial, ec);  // the kept part does not fit the file: start over next time
    return fmt::format("{}: the server refused to resume from byte {} (HTTP 416); the partial file was deleted, "
                       "run the pull again", file.path, outcome.resumed_from);
  }
  if (outcome.status >= 400) {
    if (kept == 0) fs::remove(download.partial, ec);
    try {
      fail_for_status(failure, outcome.status, outcome.headers, outcome.error_body, download.url, file.path);
    } catch (const Error& e) {
      return e.what();
    }
  }
  return fmt::format("transfer of {} was cut after {} of {} ({}); run the same command again to resume from the {} "
                     "kept in {}",
                     file.path, megabytes(kept), file.size ? megabytes(file.size) : "an unknown size", outcome.error,
                     megabytes(kept), download.partial.string());
}

fs::path relative_blob_target(const PlannedFile& file) {
  fs::path target;
  for (std::size_t i = 0, depth = std::count(file.path.begin(), file.path.end(), '/') + 2; i < depth; ++i) target /= "..";
  return target / "blobs" / file.blob;
}

void link_into_snapshot(const Plan& plan, const PlannedFile& file) {
  fs::path link = plan.repo_dir / "snapshots" / plan.snapshot / file.path;
  fs::create_directories(link.parent_path());
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(link, ec)) || fs::exists(link, ec)) fs::remove(link);
  fs::create_symlink(relative_blob_target(file), link);
}

}  // namespace

bool hub_offline_from_env() { return env_true("HF_HUB_OFFLINE"); }

PullResult pull(const PullOptions& options) {
  if (!looks_like_repo_id(options.repo_id))
    fail("'{}' is not a repository id: expected ORG/NAME, such as Qwen/Qwen2.5-0.5B-Instruct", options.repo_id);
  if (options.offline || hub_offline_from_env())
    fail("pulling {} needs the network, and network access is forbidden ({})", options.repo_id,
         options.offline ? "--offline" : "HF_HUB_OFFLINE is set");
  auto caches = hub_cache_dirs();
  if (caches.empty()) fail("no Hugging Face cache folder: set HF_HUB_CACHE, HF_HOME or HOME");
  const fs::path cache = caches.front();
  const fs::path repo_dir = cache / hub_repo_folder(options.repo_id);

  const bool modelscope = options.source == HubSource::modelscope;
  std::string endpoint = options.endpoint;
  if (endpoint.empty()) endpoint = env(modelscope ? "MODELSCOPE_ENDPOINT" : "HF_ENDPOINT");
  if (endpoint.empty()) endpoint = modelscope ? "https://www.modelscope.cn" : "https://huggingface.co";
  endpoint = without_trailing_slash(endpoint);
  std::string token = options.token;
  if (token.empty()) token = modelscope ? env("MODELSCOPE_API_TOKEN") : hugging_face_token();

  const std::string revision = !options.revision.empty() ? options.revision : modelscope ? "master" : "main";
  const Failure failure{options.repo_id, revision, endpoint, !token.empty(),
                        modelscope ? "set MODELSCOPE_API_TOKEN (or pass --token)" : "set HF_TOKEN (or pass --token)"};
  Plan plan = modelscope ? plan_modelscope(options, failure, token, repo_dir)
                         : plan_hugging_face(options, failure, token, repo_dir);
  if (plan.matching == 0) {
    std::string globs;
    for (const auto& glob : options.include) globs += " " + glob;
    fail("no file of {} at revision {} {}", options.repo_id, revision,
         globs.empty() ? "is listed: the repository is empty" : "matches --include" + globs);
  }

  // One transfer per blob: files with the same contents share it.
  const fs::path blobs = repo_dir / "blobs";
  std::vector<Download> downloads;
  std::vector<std::vector<std::size_t>> files_of_download;
  std::map<std::string, std::size_t> download_of_blob;
  std::uint64_t already = 0;
  for (std::size_t i = 0; i < plan.missing.size(); ++i) {
    const PlannedFile& file = plan.missing[i];
    if (fs::exists(blobs / file.blob)) continue;  // cached under another path or revision: link only
    auto [it, added] = download_of_blob.emplace(file.blob, downloads.size());
    if (added) {
      Download download{file.url, file.headers, blobs / (file.blob + ".incomplete"), file.size, file.path};
      std::error_code ec;
      if (fs::exists(download.partial, ec)) already += fs::file_size(download.partial, ec);
      downloads.push_back(std::move(download));
      files_of_download.emplace_back();
    }
    files_of_download[it->second].push_back(i);
  }

  PullResult result;
  result.commit = plan.snapshot;
  result.snapshot = repo_dir / "snapshots" / plan.snapshot;
  result.files = plan.matching;
  std::vector<std::string> problems;
  if (!downloads.empty()) {
    std::uint64_t total = 0;
    for (const auto& download : downloads) total += download.expected_size;
    std::fprintf(stderr, "%s: downloading %zu file%s (%s%s) from %s into %s\n", options.repo_id.c_str(), downloads.size(),
                 downloads.size() == 1 ? "" : "s", megabytes(total).c_str(),
                 already ? (", " + megabytes(already) + " already partly there: resuming").c_str() : "",
                 endpoint.c_str(), repo_dir.string().c_str());
    Progress progress(options.repo_id, downloads, already);
    auto outcomes = hub::download_all(downloads, options.parallel_files,
                                      [&](std::uint64_t bytes, const DownloadOutcome* finished, std::size_t index) {
                                        progress.update(bytes, finished, index);
                                      });
    for (std::size_t d = 0; d < downloads.size(); ++d) {
      const PlannedFile& file = plan.missing[files_of_download[d].front()];
      const Download& download = downloads[d];
      const DownloadOutcome& outcome = outcomes[d];
      result.bytes += outcome.transferred;
      if (!outcome.complete) {
        problems.push_back(download_problem(file, download, outcome, cache, failure));
        continue;
      }
      std::uint64_t size = fs::file_size(download.partial);
      if (file.size && size != file.size) {
        fs::remove(download.partial);
        problems.push_back(fmt::format("{}: received {} bytes where the hub announced {}; the file was deleted, run the "
                                       "pull again", file.path, size, file.size));
        continue;
      }
      if (!file.sha256.empty()) {
        std::string actual = sha256_of_file(download.partial);
        if (actual != file.sha256) {
          fs::remove(download.partial);
          problems.push_back(fmt::format("sha256 mismatch for {}: expected {} (from the hub), got {}; the corrupt download "
                                         "was deleted, run the pull again",
                                         file.path, file.sha256, actual));
          continue;
        }
      }
      fs::rename(download.partial, blobs / file.blob);
      result.downloaded += files_of_download[d].size();
    }
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& problem : problems) all += (all.empty() ? "" : "\n  ") + problem;
    fail("pulling {} failed ({} of {} file{}):\n  {}", options.repo_id, problems.size(), downloads.size(),
         downloads.size() == 1 ? "" : "s", all);
  }
  // Only now, with every blob whole and checked, does the snapshot show the files.
  for (const auto& file : plan.missing) link_into_snapshot(plan, file);
  if (!plan.ref.empty()) write_file_atomically(repo_dir / "refs" / plan.ref, plan.snapshot);
  return result;
}

void pull_if_missing(const std::string& model, bool offline) {
  std::error_code ec;
  if (model.empty() || fs::exists(model, ec)) return;  // a local folder or file wins over a repo id
  if (!looks_like_repo_id(model) || !find_cached_snapshot(model).empty()) return;
  if (offline || hub_offline_from_env()) {
    std::string caches;
    for (const auto& cache : hub_cache_dirs()) caches += "\n  " + (cache / hub_repo_folder(model)).string();
    fail("model {} is not cached and pulling is forbidden ({}); looked in:{}\nrun `inferlab pull {}` where the network is "
         "allowed, or pass a local model folder",
         model, offline ? "--offline" : "HF_HUB_OFFLINE is set", caches, model);
  }
  std::fprintf(stderr, "%s is not in the Hugging Face cache: pulling it (every file at main; --offline forbids this)\n",
               model.c_str());
  PullOptions options;
  options.repo_id = model;
  PullResult result = pull(options);
  std::fprintf(stderr, "%s: %zu files in %s\n", model.c_str(), result.files, result.snapshot.string().c_str());
}

}  // namespace inferlab
