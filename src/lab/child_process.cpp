// Child processes of the sweep (see child_process.h).
#include "lab/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

int decode_status(int raw) { return WIFEXITED(raw) ? WEXITSTATUS(raw) : WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : raw; }

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  if (argv.empty()) fail("no program to start");
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write {}: {}", log.string(), std::strerror(errno));
  // The exec's failure comes back through a close-on-exec pipe: nothing read means exec succeeded.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(fd);
    fail("pipe: {}", std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(report[0]);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execv(args[0], args.data());
    const int e = errno;
    [[maybe_unused]] auto n = ::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(fd);
  ::close(report[1]);
  if (pid_ < 0) {
    ::close(report[0]);
    fail("cannot start {}: {}", argv[0], std::strerror(errno));
  }
  int exec_errno = 0;
  const ssize_t n = ::read(report[0], &exec_errno, sizeof exec_errno);
  ::close(report[0]);
  if (n == sizeof exec_errno) {
    int raw = 0;
    ::waitpid(pid_, &raw, 0);
    pid_ = -1;
    fail("cannot start {}: {}", argv[0], std::strerror(exec_errno));
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && running()) stop(10);
}

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int raw = 0;
  const pid_t r = ::waitpid(pid_, &raw, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) status_ = decode_status(raw);
  pid_ = -1;
  return false;
}

int ChildProcess::wait() {
  if (pid_ <= 0) return status_;
  int raw = 0;
  while (::waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
  }
  status_ = decode_status(raw);
  pid_ = -1;
  return status_;
}

int ChildProcess::stop(double grace_s) {
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      return wait();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

int free_local_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail("socket: {}", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(s);
    fail("no free port on 127.0.0.1: {}", std::strerror(e));
  }
  ::close(s);
  return ntohs(addr.sin_port);
}

std::string tail_of(const std::filesystem::path& path, int lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::vector<std::string> all;
  std::string line;
  while (std::getline(in, line)) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > static_cast<std::size_t>(lines) ? all.size() - lines : 0; i < all.size(); ++i)
    out += all[i] + "\n";
  return out;
}

}  // namespace inferlab::lab
