#include "lab/http_client.h"

#include <curl/curl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <utility>

#include "inferlab/util/error.h"

namespace inferlab::lab {

namespace {

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

// Every concurrent stream holds a socket: the default soft limit (often 1024) would cap a run.
void raise_open_file_limit(std::size_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t target = std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(wanted + 64));
  if (limit.rlim_cur < target) {
    limit.rlim_cur = target;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

CURLM* as_multi(void* multi) { return static_cast<CURLM*>(multi); }

}  // namespace

struct StreamPool::Transfer {
  TransferId id = 0;
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;  // libcurl reads the POST body from here while the transfer runs
  char errbuf[CURL_ERROR_SIZE] = {0};
  TransferCallbacks callbacks;
  long status = 0;
  std::string callback_error;  // what a callback threw when it hung up that way

  ~Transfer() {
    if (easy) {
      curl_multi_remove_handle(multi, easy);
      curl_easy_cleanup(easy);
    }
    curl_slist_free_all(headers);
  }

  long response_code() {
    if (status == 0) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

  std::string curl_message(CURLcode code) const { return errbuf[0] ? errbuf : curl_easy_strerror(code); }

  // Callbacks must not throw into libcurl's C frames: an exception hangs up, its message kept.
  template <class Call>
  size_t guarded(size_t n, Call call) {
    try {
      return call() ? n : 0;
    } catch (const std::exception& e) {
      callback_error = e.what();
      return 0;
    }
  }

  static size_t on_write(char* data, size_t size, size_t count, void* raw) {
    auto& t = *static_cast<Transfer*>(raw);
    const size_t n = size * count;
    return t.guarded(n, [&] { return t.callbacks.on_body(t.response_code(), std::string_view(data, n)); });
  }

  static size_t on_header(char* data, size_t size, size_t count, void* raw) {
    auto& t = *static_cast<Transfer*>(raw);
    const size_t n = size * count;
    return t.guarded(n, [&] {
      t.callbacks.on_header(std::string_view(data, n));
      return true;
    });
  }
};

StreamPool::StreamPool(std::size_t max_streams) {
  static CurlGlobal once;
  std::signal(SIGPIPE, SIG_IGN);  // a server that resets a socket must not kill the run
  raise_open_file_limit(max_streams * 2);
  CURLM* multi = curl_multi_init();
  if (!multi) fail("libcurl: cannot create a multi handle");
  curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, static_cast<long>(std::clamp<std::size_t>(max_streams, 16, 100000)));
  multi_ = multi;
}

StreamPool::~StreamPool() {
  transfers_.clear();  // each removes its handle from the multi first
  curl_multi_cleanup(as_multi(multi_));
}

StreamPool::TransferId StreamPool::start(const HttpRequest& request, TransferCallbacks callbacks) {
  auto t = std::make_unique<Transfer>();
  t->id = ++next_id_;
  t->multi = as_multi(multi_);
  t->callbacks = std::move(callbacks);
  t->easy = curl_easy_init();
  if (!t->easy) fail("libcurl: cannot create a handle");
  t->headers = curl_slist_append(t->headers, "Content-Type: application/json");
  if (request.accept_event_stream) t->headers = curl_slist_append(t->headers, "Accept: text/event-stream");
  t->headers = curl_slist_append(t->headers, "Expect:");  // no 100-continue round trip on large bodies
  const std::string auth = "Authorization: Bearer " + (request.api_key.empty() ? std::string("EMPTY") : request.api_key);
  if (request.send_authorization) t->headers = curl_slist_append(t->headers, auth.c_str());
  for (const std::string& line : request.extra_headers) t->headers = curl_slist_append(t->headers, line.c_str());
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  if (request.body) {
    t->body = *request.body;
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.c_str());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
  }
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, request.timeout_ms);
  if (request.connect_timeout_ms > 0) curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, request.connect_timeout_ms);
  if (request.http_1_1) curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, Transfer::on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  if (t->callbacks.on_header) {
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, Transfer::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  }
  curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
  CURLMcode rc = curl_multi_add_handle(t->multi, e);
  if (rc != CURLM_OK) {
    curl_easy_cleanup(std::exchange(t->easy, nullptr));
    fail("libcurl: cannot start a request: {}", curl_multi_strerror(rc));
  }
  const TransferId id = t->id;
  transfers_.emplace(id, std::move(t));
  return id;
}

void StreamPool::finish(std::map<TransferId, std::unique_ptr<Transfer>>::iterator it, TransferOutcome outcome) {
  // Out of the map before on_done, which may start or cancel other transfers.
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  outcome.status = t->response_code();
  t->callbacks.on_done(outcome);
}

void StreamPool::cancel(TransferId id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;
  TransferOutcome outcome;
  outcome.end = TransferOutcome::End::cancelled;
  finish(it, std::move(outcome));
}

void StreamPool::cancel_all() {
  while (!transfers_.empty()) cancel(transfers_.begin()->first);
}

std::size_t StreamPool::perform() {
  int running = 0;
  curl_multi_perform(as_multi(multi_), &running);
  std::size_t ended = 0;
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(as_multi(multi_), &queued)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
    const CURLcode code = msg->data.result;  // msg is only valid until the handle is removed
    TransferOutcome outcome;
    if (code != CURLE_OK) {
      using End = TransferOutcome::End;
      outcome.end = code == CURLE_OPERATION_TIMEDOUT ? End::timed_out : code == CURLE_WRITE_ERROR ? End::hung_up : End::failed;
      outcome.error = outcome.end == End::hung_up && !t->callback_error.empty() ? t->callback_error : t->curl_message(code);
      outcome.error_kind = curl_easy_strerror(code);
    }
    finish(transfers_.find(t->id), std::move(outcome));
    ++ended;
  }
  return ended;
}

void StreamPool::wait(long max_ms) {
  long curl_wait = -1;
  curl_multi_timeout(as_multi(multi_), &curl_wait);
  if (curl_wait >= 0) max_ms = std::min(max_ms, curl_wait);
  if (max_ms > 0) curl_multi_poll(as_multi(multi_), nullptr, 0, static_cast<int>(max_ms), nullptr);
}

HttpResponse fetch(const HttpRequest& request, const std::function<bool(std::string_view)>& on_stream) {
  HttpResponse response;
  bool ended = false;
  StreamPool pool(1);
  pool.start(request, {.on_header =
                           [&](std::string_view line) {
                             // A status line starts the headers of a new answer (after a 100 or a redirect).
                             if (line.starts_with("HTTP/")) response.headers.clear();
                             const std::size_t colon = line.find(':');
                             if (colon == std::string_view::npos) return;
                             std::string name(line.substr(0, colon));
                             for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                             std::string_view value = line.substr(colon + 1);
                             while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
                             while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
                               value.remove_suffix(1);
                             response.headers[name] = std::string(value);
                           },
                       .on_body =
                           [&](long status, std::string_view bytes) {
                             if (on_stream && status < 300) return on_stream(bytes);
                             if (response.body.size() < (64u << 20)) response.body.append(bytes);
                             return true;
                           },
                       .on_done =
                           [&](const TransferOutcome& outcome) {
                             response.outcome = outcome;
                             ended = true;
                           }});
  for (;;) {
    pool.perform();
    if (ended) break;
    pool.wait(1000);
  }
  return response;
}

std::string HttpResponse::header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

void require_answer(const HttpResponse& response, const std::string& what) {
  if (response.outcome.end != TransferOutcome::End::answered) fail("{}: {}", what, response.outcome.error);
}

}  // namespace inferlab::lab
