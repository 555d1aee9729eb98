// `inferlab bench kernels`: each matmul kernel on the Qwen2.5-0.5B shapes, in each weight format
// and batch size, as GB/s and GFLOP/s beside the machine's probed limits.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/bench/probes.h"

namespace inferlab::bench {

struct KernelBenchOptions {
  int threads = 0;  // 0: all cores
  bool quick = false;  // skip lm_head, shorter timing (noisier)
  std::vector<std::string> formats{"bf16", "int8", "q4"};
  std::vector<int> rows{1, 4, 16};  // decode batch sizes
  std::vector<std::string> shapes;  // empty: all
  int prefill_rows = 512;           // rows of the prefill GEMM case on prefill shapes (0: skip)
  // Decode rows cycle through copies of each matrix adding up to this many MiB, so that the weights
  // come from DRAM as in a model's forward pass. 192 MiB (6x the 32 MiB L3 of a Zen 5) still let
  // the L3 serve part of them: bf16 read up to 10 % faster than from 1 GiB, and 64 MiB 20 % faster.
  int rotation_mib = 1024;
};

struct KernelTiming {
  std::string shape;
  int out = 0, in = 0;
  std::string weights;
  int rows = 0;
  double seconds = 0;  // per call, best of three rounds
  double gbs = 0;      // packed weight bytes (scales included) read per call / time
  double gflops = 0;
  std::optional<double> of_sgemm = std::nullopt;  // against OpenBLAS on the same shape, 64 rows or more
};

struct KernelBench {
  MachineProbes probes;
  int rotation_mib = 0;  // KernelBenchOptions::rotation_mib
  std::vector<KernelTiming> kernels;
};

// Throws Error on a row count that is not positive.
KernelBench run_kernel_bench(const KernelBenchOptions& options);
std::string kernel_bench_text(const KernelBench& bench);
nlohmann::json kernel_bench_json(const KernelBench& bench);

}  // namespace inferlab::bench
