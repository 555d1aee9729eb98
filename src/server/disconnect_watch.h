// Cancels the sequences of non-streaming requests whose client hung up. A non-streaming answer
// writes nothing until it is complete, so no failed write tells it the client is gone (a stream
// learns it from its next chunk, see sse_stream.cpp); one thread peeks at the waiting requests'
// sockets instead, a few times a second.
#pragma once
#include <httplib.h>

#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "inferlab/generation/scheduler.h"

namespace inferlab::api {

// The socket of the connection `req` arrived on (httplib 0.11 hands a handler no socket: found by
// its two addresses among the process's sockets); none when it cannot be found.
std::optional<int> connection_socket(const httplib::Request& req);

// True once the peer has closed the connection (or reset it); a pipelined next request is not that.
bool peer_closed(int socket);

class DisconnectWatcher {
 public:
  DisconnectWatcher();
  ~DisconnectWatcher();
  DisconnectWatcher(const DisconnectWatcher&) = delete;
  DisconnectWatcher& operator=(const DisconnectWatcher&) = delete;

  struct Entry {
    int socket;
    std::vector<std::shared_ptr<RequestStream>> streams;
  };
  // Watches while it lives; it must go before the handler returns (httplib closes the socket then).
  class Watch {
   public:
    Watch(DisconnectWatcher* watcher, std::list<Entry>::iterator entry) : watcher_(watcher), entry_(entry) {}
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    ~Watch();

   private:
    DisconnectWatcher* watcher_;
    std::list<Entry>::iterator entry_;
  };

  // Cancels `streams` when the client of `req` hangs up. Null when its socket cannot be found.
  std::unique_ptr<Watch> watch(const httplib::Request& req, std::vector<std::shared_ptr<RequestStream>> streams);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Entry> entries_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace inferlab::api
