// `inferlab bench probes`: the machine's limits, which the kernel benchmark divides by: memory
// bandwidth, the bf16/fp32/int8 instruction peaks, and OpenBLAS sgemm on the prefill shapes.
#pragma once
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "inferlab/tensor/fast/probes.h"

namespace inferlab::bench {

struct SgemmProbe {
  std::string shape;
  int m = 0, n = 0, k = 0;
  double gflops = 0;
};

struct MachineProbes {
  int threads = 0;
  std::string cpu;  // the kernels' CPU features line
  fast::BandwidthResult bandwidth;
  std::size_t l3_bytes = 0;  // fast::l3_cache_bytes (0: unknown), beside the probe's array size
  fast::PeakResult peaks;
  std::string openblas_core, openblas_config;
  std::vector<SgemmProbe> sgemm;  // 512 prompt tokens on each prefill shape
};

// Sets the kernel pool to `threads` (0: all cores). quick: shorter timing. read_bytes: the
// bandwidth probe's array (0: fast::large_sweep_bytes(), well above the L3; a benchmark that
// cycles through fewer bytes passes its own count, so that both get the same help from the L3).
MachineProbes run_probes(int threads, bool quick, std::size_t read_bytes = 0);
std::string probes_text(const MachineProbes& probes);
nlohmann::json probes_json(const MachineProbes& probes);

}  // namespace inferlab::bench
