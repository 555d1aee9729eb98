// Watching the sockets of non-streaming requests for a client that hung up (see disconnect_watch.h).
#include "server/disconnect_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace inferlab::api {
namespace {

constexpr auto kPollEvery = std::chrono::milliseconds(100);

// The port of an IPv4 or IPv6 socket address (0 for any other family).
int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return 0;
}

// The numeric host and the port of a socket address, as httplib writes remote_addr/remote_port.
bool address_is(const sockaddr_storage& address, socklen_t length, const std::string& host, int port) {
  if (port_of(address) != port) return false;
  char host_text[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host_text, sizeof host_text, nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return false;
  return host == host_text;
}

}  // namespace

// One getpeername per descriptor (it fails on anything that is not a connected socket), and the
// cheap port comparison before the rest: this runs once per non-streaming request.
std::optional<int> connection_socket(const httplib::Request& req) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return std::nullopt;
  std::optional<int> found;
  while (dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_length = sizeof peer, local_length = sizeof local;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (!address_is(peer, peer_length, req.remote_addr, req.remote_port)) continue;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_length) != 0) continue;
    if (address_is(local, local_length, req.local_addr, req.local_port)) {
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
