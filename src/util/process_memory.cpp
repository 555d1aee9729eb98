#include "inferlab/util/process_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

#include "inferlab/util/error.h"

namespace inferlab {

std::optional<int64_t> resident_bytes(int pid) {
  const std::string file = pid > 0 ? "/proc/" + std::to_string(pid) + "/statm" : "/proc/self/statm";
  std::ifstream statm(file);
  if (!statm) {
    if (pid > 0) fail("no process {} (cannot read {})", pid, file);
    return std::nullopt;
  }
  int64_t size = 0, resident = 0;  // in pages
  if (!(statm >> size >> resident)) return std::nullopt;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::optional<int64_t> huge_page_bytes() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  if (!rollup) return std::nullopt;
  std::string key;
  int64_t kib = 0;
  while (rollup >> key) {
    if (key == "AnonHugePages:" && rollup >> kib) return kib * 1024;
    rollup.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

}  // namespace inferlab
