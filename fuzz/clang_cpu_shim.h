// Forced into src/tensor/fast/cpu.cpp in the clang fuzz build only: clang 14's
// __builtin_cpu_supports does not know "f16c" (GCC's does), so that one feature is read from
// CPUID leaf 1 directly and every other name goes to the builtin.
#pragma once
#include <cpuid.h>

#include <cstring>

static inline bool inferlab_fuzz_cpu_supports(const char* name) {
  if (std::strcmp(name, "f16c") == 0) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
  }
#define INFERLAB_FEATURE(f) if (std::strcmp(name, f) == 0) return __builtin_cpu_supports(f);
  INFERLAB_FEATURE("avx2") INFERLAB_FEATURE("fma") INFERLAB_FEATURE("avx512f") INFERLAB_FEATURE("avx512bw")
  INFERLAB_FEATURE("avx512vl") INFERLAB_FEATURE("avx512dq") INFERLAB_FEATURE("avx512bf16") INFERLAB_FEATURE("avx512vnni")
  INFERLAB_FEATURE("sse4.2") INFERLAB_FEATURE("avx") INFERLAB_FEATURE("bmi2")
#undef INFERLAB_FEATURE
  return false;
}
#define __builtin_cpu_supports(name) inferlab_fuzz_cpu_supports(name)
