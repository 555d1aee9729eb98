#include "inferlab/bench/probes.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bench/qwen_shapes.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/thread_pool.h"

namespace inferlab::bench {

MachineProbes run_probes(int threads, bool quick, std::size_t read_bytes) {
  fast::set_threads(threads);
  MachineProbes probes;
  probes.bandwidth = fast::measure_bandwidth(read_bytes > 0 ? read_bytes : fast::large_sweep_bytes(), quick ? 2 : 5);
  probes.l3_bytes = fast::l3_cache_bytes();
  probes.peaks = fast::measure_peaks(quick ? 0.15 : 0.3);
  probes.threads = fast::threads();
  probes.cpu = fast::cpu_features_line();
  probes.openblas_core = fast::openblas_core();
  probes.openblas_config = fast::openblas_config();
  for (const MatmulShape& s : kQwenShapes) {
    if (!is_prefill_shape(s.name)) continue;
    const auto g = fast::measure_sgemm(512, s.out, s.in, fast::threads(), quick ? 0.15 : 0.3);
    probes.sgemm.push_back({s.name, 512, s.out, s.in, g.gflops});
  }
  return probes;
}

std::string probes_text(const MachineProbes& p) {
  std::string text;
  text += fmt::format("CPU kernels: {}\n", p.cpu);
  text += fmt::format("OpenBLAS: core {} ({})\n", p.openblas_core, p.openblas_config);
  // OpenBLAS picks its kernels by CPU model when it loads; a model newer than it knows (0.3.21 on an
  // Emerald Rapids Xeon) gets its oldest x86-64 kernels, ~6x slower there (docs/speed.md).
  // The peaks' instruction set is the CPU's own (not the INFERLAB_ISA ceiling): empty without AVX2.
  const bool simd_cpu = !p.peaks.isa.empty();
  if (simd_cpu && (p.openblas_core == "Prescott" || p.openblas_core == "Core2" || p.openblas_core == "Nehalem"))
    text += fmt::format("  OpenBLAS does not know this CPU and runs its {} kernels (--weights f32 and the reference "
                        "layer use them): set OPENBLAS_CORETYPE={} before starting inferlab\n",
                        p.openblas_core, p.peaks.isa == "avx512" ? "SkylakeX" : "Haswell");
  text += fmt::format("threads: {}\n", p.threads);
  text += fmt::format("memory read bandwidth (sum over {} MiB{}, fastest of 1, 2 or 4 streams per thread, software "
                      "prefetch none, t0 or t0+t1: {} stream{}, {}): {:.1f} GB/s; STREAM triad {:.1f} GB/s\n",
                      p.bandwidth.bytes >> 20,
                      p.l3_bytes > 0 ? fmt::format("; L3 {} MiB", p.l3_bytes >> 20) : std::string(),
                      p.bandwidth.read_streams, p.bandwidth.read_streams == 1 ? "" : "s",
                      read_prefetch_name(p.bandwidth.read_prefetch), p.bandwidth.read_gbs, p.bandwidth.triad_gbs);
  if (p.peaks.isa == "avx2")
    text += fmt::format("peak (AVX2): fp32 FMA {:.0f} GFLOP/s (bf16 weights run on it), int8 (vpmaddubsw+vpmaddwd) {:.0f} GOP/s\n",
                        p.peaks.fp32_gflops, p.peaks.int8_gops);
  else
    text += fmt::format("peak: bf16 dot (vdpbf16ps) {:.0f} GFLOP/s, fp32 FMA {:.0f} GFLOP/s, int8 (vpdpbusd) {:.0f} GOP/s\n",
                        p.peaks.bf16_gflops, p.peaks.fp32_gflops, p.peaks.int8_gops);
  if (p.peaks.amx_int8_gops > 0)
    text += fmt::format("peak (AMX): int8 tdpbssd {:.0f} GOP/s (whole 16 x 16 x 64 tiles; prefill multiplies one block of 32 "
                        "at a time and scales each block's sums apart, far below it)\n",
                        p.peaks.amx_int8_gops);
  for (const SgemmProbe& g : p.sgemm)
    text += fmt::format("OpenBLAS sgemm {}x{}x{} ({}): {:.0f} GFLOP/s\n", g.m, g.n, g.k, g.shape, g.gflops);
  return text;
}

nlohmann::json probes_json(const MachineProbes& p) {
  nlohmann::json doc;
  doc["threads"] = p.threads;
  doc["cpu"] = p.cpu;
  doc["bandwidth"] = {{"read_gbs", p.bandwidth.read_gbs},
                      {"read_streams_per_thread", p.bandwidth.read_streams},
                      {"read_prefetch", read_prefetch_name(p.bandwidth.read_prefetch)},
                      {"triad_gbs", p.bandwidth.triad_gbs},
                      {"array_bytes", p.bandwidth.bytes},
                      {"l3_bytes", p.l3_bytes}};
  doc["peaks"] = {{"isa", p.peaks.isa},
                  {"bf16_gflops", p.peaks.bf16_gflops},
                  {"fp32_gflops", p.peaks.fp32_gflops},
                  {"int8_gops", p.peaks.int8_gops},
                  {"amx_int8_gops", p.peaks.amx_int8_gops}};
  doc["openblas"] = {{"core", p.openblas_core}, {"config", p.openblas_config}};
  nlohmann::json gemms = nlohmann::json::array();
  for (const SgemmProbe& g : p.sgemm)
    gemms.push_back({{"shape", g.shape}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"gflops", g.gflops}});
  doc["sgemm"] = gemms;
  return doc;
}

}  // namespace inferlab::bench
