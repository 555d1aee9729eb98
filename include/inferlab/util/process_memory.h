// How much memory a process holds, read from the kernel: the one place the server's /metrics,
// the soak's leak check and the engine benchmark get their figures from.
#pragma once
#include <cstdint>
#include <optional>

namespace inferlab {

// Resident set size of process `pid` (0: this process), from /proc/PID/statm.
// nullopt when /proc cannot be read; Error when `pid` names no process.
std::optional<int64_t> resident_bytes(int pid = 0);

// The most this process has held resident since it started (getrusage's ru_maxrss).
int64_t peak_resident_bytes();

// Of this process's resident memory, the bytes on transparent huge pages (AnonHugePages of
// /proc/self/smaps_rollup); nullopt when that file cannot be read (kernels before 4.14).
std::optional<int64_t> huge_page_bytes();

}  // namespace inferlab
