// The hub layer's HTTP on libcurl: one blocking request (listings, HEAD metadata) and many
// resumable file downloads at once on curl multi. Only this file pair knows curl.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace inferlab::hub {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; of the last response read
  std::string body;
  std::string url;                             // the URL asked (redirects not followed) or reached
};

// method: "GET" or "HEAD". Headers are "Name: value" lines. With follow_redirects false a 3xx is
// returned as it is (huggingface_hub reads the metadata of the first answer). A transport failure
// (no connection, timeout) throws Error naming the URL.
HttpResponse http_request(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                          bool follow_redirects);

// One file to fetch into `partial` (appended to: a partial file left by an earlier run is resumed
// with "Range: bytes=N-"; a server that answers 200 instead of 206 restarts it from zero).
struct Download {
  std::string url;
  std::vector<std::string> headers;
  std::filesystem::path partial;
  std::uint64_t expected_size = 0;  // 0: unknown
  std::string label;                // the repo path, for progress and errors
};

struct DownloadOutcome {
  bool complete = false;     // the transfer finished with 200/206 and every byte was written
  long status = 0;           // the final HTTP status (0: no answer)
  std::string error;         // what went wrong, in words, when not complete
  int write_errno = 0;       // errno of a failed write to `partial` (ENOSPC, EFBIG, EDQUOT, ...)
  std::string error_body;    // the start of an error answer's body
  std::map<std::string, std::string> headers;  // the final answer's headers (lower-cased names)
  std::uint64_t resumed_from = 0;    // bytes already in `partial` when the request was sent
  std::uint64_t transferred = 0;     // bytes written by this run
};

// Called about every 100 ms with `finished` null, and once when a file ends with its outcome:
// bytes written so far by this run over all files.
using DownloadProgress =
    std::function<void(std::uint64_t bytes_now, const DownloadOutcome* finished, std::size_t finished_index)>;

// Runs the downloads, `parallel` at a time; returns one outcome per download, in order.
std::vector<DownloadOutcome> download_all(const std::vector<Download>& downloads, int parallel,
                                          const DownloadProgress& progress);

// "https://host:port" of a URL (scheme and authority), to tell whether a redirect leaves the hub.
std::string url_origin(const std::string& url);

// Percent-encoding of one path segment or query value (RFC 3986 unreserved characters kept).
std::string url_escape(const std::string& text);

}  // namespace inferlab::hub
