// Elapsed wall-clock time, as the benchmarks and the soak measure it.
#pragma once
#include <chrono>

namespace inferlab::lab {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace inferlab::lab
