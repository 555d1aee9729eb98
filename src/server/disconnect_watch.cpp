// Watching the sockets of non-streaming requests for a client that hung up (see disconnect_watch.h).
#include "server/disconnect_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace inferlab::api {
namespace {

constexpr auto kPollEvery = std::chrono::milliseconds(100);

// The numeric host and the port of a socket address, as httplib writes remote_addr/remote_port.
bool address_is(const sockaddr_storage& address, socklen_t length, const std::string& host, int port) {
  char host_text[NI_MAXHOST], port_text[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host_text, sizeof host_text, port_text,
                  sizeof port_text, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return port == std::atoi(port_text) && host == host_text;
}

}  // namespace

std::optional<int> connection_socket(const httplib::Request& req) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return std::nullopt;
  std::optional<int> found;
  while (dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    struct stat info {};
    if (fstat(static_cast<int>(fd), &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_length = sizeof peer, local_length = sizeof local;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_length) != 0) continue;
    if (address_is(peer, peer_length, req.remote_addr, req.remote_port) &&
        address_is(local, local_length, req.local_addr, req.local_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
  return found;
}

bool peer_closed(int socket) {
  char byte;
  const ssize_t n = recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // orderly shutdown
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

DisconnectWatcher::DisconnectWatcher() : thread_([this] { run(); }) {}

DisconnectWatcher::~DisconnectWatcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::unique_ptr<DisconnectWatcher::Watch> DisconnectWatcher::watch(const httplib::Request& req,
                                                                   std::vector<std::shared_ptr<RequestStream>> streams) {
  const std::optional<int> socket = connection_socket(req);
  if (!socket) return nullptr;
  std::lock_guard lock(mutex_);
  entries_.push_front({*socket, std::move(streams)});
  return std::make_unique<Watch>(this, entries_.begin());
}

DisconnectWatcher::Watch::~Watch() {
  std::lock_guard lock(watcher_->mutex_);
  watcher_->entries_.erase(entry_);
}

void DisconnectWatcher::run() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, kPollEvery, [this] { return stop_; })) {
    for (Entry& entry : entries_) {
      if (entry.streams.empty() || !peer_closed(entry.socket)) continue;
      for (auto& stream : entry.streams) stream->cancel();
      entry.streams.clear();  // cancelled once
    }
  }
}

}  // namespace inferlab::api
