// The kernel paths a test runs on this machine: every instruction set it can run, AVX-512's
// one-row tiles under each prefetch hint, and a guard that restores the defaults afterwards.
#pragma once
#include <vector>

#include "inferlab/tensor/fast/cpu.h"

namespace inferlab::test {

// The instruction sets this machine can run, scalar first.
inline std::vector<fast::Isa> runnable_isas() {
  using fast::Isa;
  std::vector<Isa> isas{Isa::Scalar};
  if (fast::detected_isa() >= Isa::Avx2) isas.push_back(Isa::Avx2);
  if (fast::detected_isa() >= Isa::Avx512) isas.push_back(Isa::Avx512);
  if (fast::detected_isa() >= Isa::Amx) isas.push_back(Isa::Amx);
  return isas;
}

// The AVX2 / AVX-512 one-row tiles under each weight-prefetch hint (the same arithmetic, so the same bits).
inline std::vector<fast::StreamPrefetch> prefetch_hints(fast::Isa isa) {
  if (isa >= fast::Isa::Avx512) return {fast::StreamPrefetch::T0, fast::StreamPrefetch::Nta, fast::StreamPrefetch::NtaPanels};
  if (isa >= fast::Isa::Avx2) return {fast::StreamPrefetch::T0, fast::StreamPrefetch::Nta};
  return {fast::default_stream_prefetch()};
}

// Restores the instruction-set ceiling and the prefetch hint a test changed.
struct IsaGuard {
  ~IsaGuard() {
    fast::set_isa_limit(fast::Isa::Amx);
    fast::set_stream_prefetch(fast::default_stream_prefetch());
  }
};

}  // namespace inferlab::test
