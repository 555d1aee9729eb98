// A child process of the sweep (a server, a bench run): started with its stdout and stderr in a log
// file, watched, stopped with SIGTERM (then SIGKILL after a grace period).
#pragma once
#include <filesystem>
#include <string>
#include <sys/types.h>
#include <vector>

namespace inferlab::lab {

class ChildProcess {
 public:
  // Throws Error when it cannot be started (the program missing, the log not writable).
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log);
  ~ChildProcess();  // stops it if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running();                  // false once it exited (its status then in exit_status())
  int wait();                      // blocks until it exits; its exit status (128 + N when killed by signal N)
  int stop(double grace_s);        // SIGTERM, up to grace_s for it to exit, then SIGKILL; its exit status
  int exit_status() const { return status_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// A port on 127.0.0.1 that was free a moment ago (bound to port 0 and released).
int free_local_port();
// The last `lines` lines of a text file ("" when unreadable).
std::string tail_of(const std::filesystem::path& path, int lines);

}  // namespace inferlab::lab
