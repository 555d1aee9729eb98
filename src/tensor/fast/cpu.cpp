#include "inferlab/tensor/fast/cpu.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "inferlab/util/error.h"

namespace inferlab::fast {

namespace {
// F16C from CPUID leaf 1 rather than __builtin_cpu_supports("f16c"): clang 14 does not know that
// name (GCC does), and the fuzz build compiles this file with clang.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// AMX-TILE and AMX-INT8: CPUID leaf 7, EDX bits 24 and 25 (GCC 12's __builtin_cpu_supports does
// not know them).
bool has_amx_int8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 24)) && (edx & (1u << 25));
}

// Linux hands a process the 8 KiB of tile state only when it asks (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux 5.16 on); a tile instruction without it is SIGILL. A
// kernel or hypervisor that refuses leaves the CPU at AVX-512.
bool amx_tiles_granted() {
  constexpr int kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

Isa detect() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  if (!avx2) return Isa::Scalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni");
  if (!avx512) return Isa::Avx2;
  return has_amx_int8() && amx_tiles_granted() ? Isa::Amx : Isa::Avx512;
}

Isa initial_limit() {
  const char* env = std::getenv("INFERLAB_ISA");
  return env && *env ? parse_isa(env) : Isa::Amx;
}

std::atomic<int> limit{-1};

bool amd_cpu() {
  unsigned max_leaf = 0, vendor[3] = {0, 0, 0};
  if (!__get_cpuid(0, &max_leaf, &vendor[0], &vendor[2], &vendor[1])) return false;
  return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
}

// The CPU family as AMD numbers it: base family 0Fh plus the extended family (19h Zen 3 / 4, 1Ah Zen 5).
unsigned amd_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF, extended = (eax >> 20) & 0xFF;
  return base == 0xF ? base + extended : base;
}

StreamPrefetch initial_prefetch() {
  const char* env = std::getenv("INFERLAB_PREFETCH");
  return env && *env ? parse_stream_prefetch(env) : default_stream_prefetch();
}

std::atomic<int> prefetch{-1};

// A setting held as an int (-1: not read yet), its first value from the environment.
template <typename Enum>
int setting(std::atomic<int>& value, Enum (*initial)()) {
  int current = value.load(std::memory_order_relaxed);
  if (current < 0) {
    current = static_cast<int>(initial());
    value.store(current, std::memory_order_relaxed);
  }
  return current;
}
}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Amx: return "amx";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  if (name == "scalar") return Isa::Scalar;
  if (name == "avx2") return Isa::Avx2;
  if (name == "avx512") return Isa::Avx512;
  if (name == "amx") return Isa::Amx;
  fail("unknown instruction set '{}': expected scalar, avx2, avx512 or amx", name);
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  const int current = setting(limit, initial_limit);
  const int hw = static_cast<int>(detected_isa());
  return static_cast<Isa>(current < hw ? current : hw);
}

void set_isa_limit(Isa isa) { limit.store(static_cast<int>(isa), std::memory_order_relaxed); }

const char* stream_prefetch_name(StreamPrefetch hint) {
  switch (hint) {
    case StreamPrefetch::Nta: return "nta";
    case StreamPrefetch::NtaPanels: return "nta-panels";
    case StreamPrefetch::T0: break;
  }
  return "t0";
}

StreamPrefetch parse_stream_prefetch(const std::string& name) {
  if (name == "t0") return StreamPrefetch::T0;
  if (name == "nta") return StreamPrefetch::Nta;
  if (name == "nta-panels") return StreamPrefetch::NtaPanels;
  fail("unknown prefetch hint '{}' (INFERLAB_PREFETCH): expected t0, nta or nta-panels", name);
}

StreamPrefetch default_stream_prefetch() {
  static const StreamPrefetch hint = !amd_cpu()               ? StreamPrefetch::T0
                                     : amd_family() >= 0x1A   ? StreamPrefetch::NtaPanels
                                                               : StreamPrefetch::Nta;
  return hint;
}

StreamPrefetch active_stream_prefetch() { return static_cast<StreamPrefetch>(setting(prefetch, initial_prefetch)); }

void set_stream_prefetch(StreamPrefetch hint) { prefetch.store(static_cast<int>(hint), std::memory_order_relaxed); }

std::string cpu_features_line() {
  __builtin_cpu_init();
  std::string line = isa_name(active_isa());
  line += " (";
  const char* names[] = {"avx512f", "avx512bw", "avx512vl", "avx512bf16", "avx512vnni", "amx-int8", "avx2", "fma", "f16c"};
  bool first = true;
  for (const char* name : names) {
    bool has = false;
    // __builtin_cpu_supports needs a string literal, hence the spelled-out chain.
    if (std::string(name) == "avx512f") has = __builtin_cpu_supports("avx512f");
    else if (std::string(name) == "avx512bw") has = __builtin_cpu_supports("avx512bw");
    else if (std::string(name) == "avx512vl") has = __builtin_cpu_supports("avx512vl");
    else if (std::string(name) == "avx512bf16") has = __builtin_cpu_supports("avx512bf16");
    else if (std::string(name) == "avx512vnni") has = __builtin_cpu_supports("avx512vnni");
    else if (std::string(name) == "avx2") has = __builtin_cpu_supports("avx2");
    else if (std::string(name) == "fma") has = __builtin_cpu_supports("fma");
    else if (std::string(name) == "f16c") has = has_f16c();
    else if (std::string(name) == "amx-int8") has = has_amx_int8();
    if (!has) continue;
    line += first ? "" : " ";
    line += name;
    first = false;
  }
  line += ")";
  if (active_isa() != detected_isa()) line += fmt::format(", limited from {}", isa_name(detected_isa()));
  if (active_isa() >= Isa::Avx2) line += fmt::format(", one-row prefetch {}", stream_prefetch_name(active_stream_prefetch()));
  return line;
}

}  // namespace inferlab::fast
