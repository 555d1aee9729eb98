#include "hub/http.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "inferlab/util/error.h"

namespace inferlab::hub {
namespace {

constexpr const char* kUserAgent = "inferlab/0.1";
constexpr std::size_t kErrorBodyLimit = 4096;

void init_curl_once() {
  static const bool initialised = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  if (!initialised) fail("libcurl could not be initialised");
}

struct CurlHeaders {
  curl_slist* list = nullptr;
  explicit CurlHeaders(const std::vector<std::string>& lines) {
    for (const auto& line : lines) list = curl_slist_append(list, line.c_str());
  }
  ~CurlHeaders() { curl_slist_free_all(list); }
  CurlHeaders(const CurlHeaders&) = delete;
  CurlHeaders& operator=(const CurlHeaders&) = delete;
};

using EasyHandle = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;

EasyHandle new_easy() {
  init_curl_once();
  EasyHandle easy(curl_easy_init(), &curl_easy_cleanup);
  if (!easy) fail("libcurl could not create a transfer");
  curl_easy_setopt(easy.get(), CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled connection (no byte for a minute) is an error, never a hang.
  curl_easy_setopt(easy.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(easy.get(), CURLOPT_MAXREDIRS, 10L);
  return easy;
}

// "Name: value\r\n" into the map (lower-cased name); a status line starts a new response's set, so
// after redirects the map holds the last response's headers.
std::size_t collect_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto& headers = *static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    headers.clear();
    return size * count;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  std::size_t start = line.find_first_not_of(" \t", colon + 1);
  headers[name] = start == std::string::npos ? "" : line.substr(start);
  return size * count;
}

std::size_t collect_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// One download's state while curl runs it.
struct Transfer {
  const Download* download = nullptr;
  DownloadOutcome outcome;
  int fd = -1;
  EasyHandle easy{nullptr, &curl_easy_cleanup};
  std::unique_ptr<CurlHeaders> headers;
  std::map<std::string, std::string> response_headers;
  bool body_started = false;
  bool writing_file = false;
};

// The body goes to the partial file only for 200 (from zero) or 206 (appended at the resumed offset);
// any other status's body is kept as the error text.
std::size_t write_to_partial(char* data, std::size_t size, std::size_t count, void* user) {
  auto& transfer = *static_cast<Transfer*>(user);
  std::size_t bytes = size * count;
  if (!transfer.body_started) {
    transfer.body_started = true;
    long status = 0;
    curl_easy_getinfo(transfer.easy.get(), CURLINFO_RESPONSE_CODE, &status);
    if (status == 200 && transfer.outcome.resumed_from > 0) {
      // The server ignored the Range: the whole file is coming, start over.
      if (ftruncate(transfer.fd, 0) != 0 || lseek(transfer.fd, 0, SEEK_SET) != 0) {
        transfer.outcome.write_errno = errno;
        return 0;
      }
      transfer.outcome.resumed_from = 0;
    }
    transfer.writing_file = status == 200 || status == 206;
  }
  if (!transfer.writing_file) {
    auto room = kErrorBodyLimit - std::min(kErrorBodyLimit, transfer.outcome.error_body.size());
    transfer.outcome.error_body.append(data, std::min(room, bytes));
    return bytes;
  }
  std::size_t written = 0;
  while (written < bytes) {
    ssize_t n = ::write(transfer.fd, data + written, bytes - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      transfer.outcome.write_errno = errno;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    written += static_cast<std::size_t>(n);
    transfer.outcome.transferred += static_cast<std::uint64_t>(n);
  }
  return bytes;
}

void start_transfer(Transfer& transfer, CURLM* multi) {
  const Download& download = *transfer.download;
  std::filesystem::create_directories(download.partial.parent_path());
  transfer.fd = ::open(download.partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (transfer.fd < 0) fail("cannot open {} for writing: {}", download.partial.string(), std::strerror(errno));
  // Two pulls of one repo at once would append to the same partial file.
  if (flock(transfer.fd, LOCK_EX | LOCK_NB) != 0)
    fail("{} is being downloaded by another process (it holds {}); wait for it to finish", download.label,
         download.partial.string());
  struct stat info {};
  fstat(transfer.fd, &info);
  transfer.outcome.resumed_from = static_cast<std::uint64_t>(info.st_size);

  std::vector<std::string> lines = download.headers;
  if (transfer.outcome.resumed_from > 0) lines.push_back("Range: bytes=" + std::to_string(transfer.outcome.resumed_from) + "-");
  transfer.headers = std::make_unique<CurlHeaders>(lines);
  transfer.easy = new_easy();
  CURL* easy = transfer.easy.get();
  curl_easy_setopt(easy, CURLOPT_URL, download.url.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, transfer.headers->list);
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_to_partial);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer.response_headers);
  curl_easy_setopt(easy, CURLOPT_PRIVATE, static_cast<void*>(&transfer));
  curl_multi_add_handle(multi, easy);
}

void finish_transfer(Transfer& transfer, CURLcode code) {
  curl_easy_getinfo(transfer.easy.get(), CURLINFO_RESPONSE_CODE, &transfer.outcome.status);
  transfer.outcome.headers = transfer.response_headers;
  if (transfer.fd >= 0) {
    if (::close(transfer.fd) != 0 && transfer.outcome.write_errno == 0 && code == CURLE_OK) transfer.outcome.write_errno = errno;
    transfer.fd = -1;
  }
  DownloadOutcome& outcome = transfer.outcome;
  long status = outcome.status;
  if (outcome.write_errno != 0) {
    outcome.error = std::strerror(outcome.write_errno);
  } else if (code != CURLE_OK) {
    outcome.error = curl_easy_strerror(code);
  } else if (status != 200 && status != 206) {
    outcome.error = "HTTP " + std::to_string(status);
  } else if (status == 206) {
    // The answer must start where the partial file ends: "Content-Range: bytes N-M/T".
    const std::string& range = transfer.response_headers["content-range"];
    std::string expected = "bytes " + std::to_string(outcome.resumed_from) + "-";
    if (range.rfind(expected, 0) != 0) outcome.error = "the server answered the range request with '" + range + "'";
  }
  outcome.complete = outcome.error.empty();
}

}  // namespace

HttpResponse http_request(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                          bool follow_redirects) {
  EasyHandle easy = new_easy();
  CurlHeaders header_list(headers);
  HttpResponse response;
  curl_easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy.get(), CURLOPT_HTTPHEADER, header_list.list);
  curl_easy_setopt(easy.get(), CURLOPT_FOLLOWLOCATION, follow_redirects ? 1L : 0L);
  if (method == "HEAD") curl_easy_setopt(easy.get(), CURLOPT_NOBODY, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT, 120L);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, collect_body);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy.get(), CURLOPT_HEADERFUNCTION, collect_header);
  curl_easy_setopt(easy.get(), CURLOPT_HEADERDATA, &response.headers);
  CURLcode code = curl_easy_perform(easy.get());
  if (code != CURLE_OK) fail("cannot reach {}: {}", url, curl_easy_strerror(code));
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &response.status);
  char* reached = nullptr;
  curl_easy_getinfo(easy.get(), CURLINFO_EFFECTIVE_URL, &reached);
  response.url = reached ? reached : url;
  return response;
}

std::vector<DownloadOutcome> download_all(const std::vector<Download>& downloads, int parallel,
                                          const DownloadProgress& progress) {
  init_curl_once();
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(), &curl_multi_cleanup);
  if (!multi) fail("libcurl could not create a transfer group");
  std::vector<Transfer> transfers(downloads.size());
  for (std::size_t i = 0; i < downloads.size(); ++i) transfers[i].download = &downloads[i];

  auto bytes_now = [&] {
    std::uint64_t total = 0;
    for (const auto& transfer : transfers) total += transfer.outcome.transferred;
    return total;
  };
  std::size_t next = 0, running = 0;
  auto start_more = [&] {
    while (running < static_cast<std::size_t>(std::max(1, parallel)) && next < transfers.size()) {
      start_transfer(transfers[next++], multi.get());
      ++running;
    }
  };
  try {
    start_more();
    auto last_tick = std::chrono::steady_clock::now();
    while (running > 0) {
      int still_running = 0;
      curl_multi_perform(multi.get(), &still_running);
      int queued = 0;
      while (CURLMsg* message = curl_multi_info_read(multi.get(), &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        char* private_data = nullptr;
        curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &private_data);
        auto* transfer = reinterpret_cast<Transfer*>(private_data);
        CURLcode code = message->data.result;
        curl_multi_remove_handle(multi.get(), message->easy_handle);
        finish_transfer(*transfer, code);
        --running;
        if (progress) progress(bytes_now(), &transfer->outcome, static_cast<std::size_t>(transfer - transfers.data()));
      }
      start_more();
      if (running == 0) break;
      curl_multi_poll(multi.get(), nullptr, 0, 100, nullptr);
      auto now = std::chrono::steady_clock::now();
      if (progress && now - last_tick >= std::chrono::milliseconds(100)) {
        last_tick = now;
        progress(bytes_now(), nullptr, 0);
      }
    }
  } catch (...) {
    for (auto& transfer : transfers) {
      if (transfer.easy) curl_multi_remove_handle(multi.get(), transfer.easy.get());
      if (transfer.fd >= 0) ::close(transfer.fd);
    }
    throw;
  }
  std::vector<DownloadOutcome> outcomes;
  outcomes.reserve(transfers.size());
  for (auto& transfer : transfers) outcomes.push_back(std::move(transfer.outcome));
  return outcomes;
}

std::string url_origin(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  auto path = url.find('/', scheme + 3);
  return url.substr(0, path);
}

std::string url_escape(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string escaped;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      escaped += static_cast<char>(c);
    } else {
      escaped += '%';
      escaped += hex[c >> 4];
      escaped += hex[c & 15];
    }
  }
  return escaped;
}

}  // namespace inferlab::hub
