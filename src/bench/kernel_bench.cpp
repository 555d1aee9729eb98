#include "inferlab/bench/kernel_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/qwen_shapes.h"
#include "lab/timing.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/util/error.h"

namespace inferlab::bench {

using lab::seconds_since;  // the soak measures with the same clock

namespace {

// Enough distinct copies of a matrix that cycling through them reads from DRAM, not the L3
// (KernelBenchOptions::rotation_mib).
std::vector<fast::PackedMatrix> rotation(const std::vector<float>& w, const MatmulShape& s, fast::WeightFormat format,
                                         std::size_t total_bytes) {
  std::vector<fast::PackedMatrix> copies;
  std::size_t held = 0;
  do {
    copies.push_back(fast::PackedMatrix::from_f32(w.data(), s.out, s.in, format));
    held += copies.back().bytes();
  } while (held < total_bytes);
  return copies;
}

double time_matmuls(const std::vector<fast::PackedMatrix>& copies, const std::vector<float>& x, int rows,
                    std::vector<float>& y, double min_seconds) {
  for (const auto& m : copies) fast::matmul(x.data(), rows, m, nullptr, y.data());  // warm-up
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    long calls = 0;
    const auto start = std::chrono::steady_clock::now();
    do {
      for (const auto& m : copies) fast::matmul(x.data(), rows, m, nullptr, y.data()), ++calls;
    } while (seconds_since(start) < min_seconds / 3);
    best = std::min(best, seconds_since(start) / calls);
  }
  return best;
}

// The dot-product peak a format's prefill runs against: int8 activations (int8, q4, ...) the int8
// one (vpdpbusd / vpmaddubsw), bf16 its own, the rest fp32's (0 when the probe has none).
double dot_peak(const MachineProbes& probes, const std::string& weights) {
  const fast::WeightFormat format = fast::parse_format(weights);
  if (fast::int8_activations(format)) return probes.peaks.int8_gops;
  return format == fast::WeightFormat::BF16 ? probes.peaks.bf16_gflops : probes.peaks.fp32_gflops;
}

}  // namespace

KernelBench run_kernel_bench(const KernelBenchOptions& options) {
  for (int r : options.rows)
    if (r <= 0) fail("--rows: {} is not a positive row count", r);
  if (options.rotation_mib <= 0) fail("--rotation-mib: {} is not a positive size", options.rotation_mib);
  KernelBench bench;
  bench.rotation_mib = options.rotation_mib;
  // The probe reads as many bytes as each case cycles through, so that both get the same help from the L3.
  bench.probes = run_probes(options.threads, options.quick, std::size_t(options.rotation_mib) << 20);
  std::map<std::string, double> sgemm;
  for (const SgemmProbe& g : bench.probes.sgemm) sgemm[g.shape] = g.gflops;
  const double min_seconds = options.quick ? 0.1 : 0.3;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (const MatmulShape& s : kQwenShapes) {
    if (options.quick && std::string(s.name) == "lm_head") continue;
    if (!options.shapes.empty() && std::find(options.shapes.begin(), options.shapes.end(), s.name) == options.shapes.end())
      continue;
    std::vector<float> w(static_cast<std::size_t>(s.out) * s.in);
    for (auto& v : w) v = dist(rng);
    for (const std::string& name : options.formats) {
      const fast::WeightFormat format = fast::parse_format(name);
      std::vector<int> row_counts = options.rows;
      if (is_prefill_shape(s.name) && options.prefill_rows > 0) row_counts.push_back(options.prefill_rows);
      std::vector<fast::PackedMatrix> copies = rotation(w, s, format, std::size_t(options.rotation_mib) << 20);
      for (int rows : row_counts) {
        // Many rows are compute-bound: one copy is enough (and keeps packing time down).
        if (rows > 64 && copies.size() > 1) copies.resize(1);
        std::vector<float> x(static_cast<std::size_t>(rows) * s.in), y(static_cast<std::size_t>(rows) * s.out);
        for (auto& v : x) v = dist(rng) * 50;
        KernelTiming k{s.name, s.out, s.in, name, rows};
        k.seconds = time_matmuls(copies, x, rows, y, min_seconds);
        k.gbs = copies.front().bytes() / k.seconds / 1e9;
        k.gflops = 2.0 * rows * s.out * s.in / k.seconds / 1e9;
        if (sgemm.count(s.name) && rows >= 64) k.of_sgemm = k.gflops / sgemm[s.name];
        bench.kernels.push_back(std::move(k));
      }
    }
  }
  return bench;
}

std::string kernel_bench_text(const KernelBench& bench) {
  const double bandwidth = bench.probes.bandwidth.read_gbs;
  const double bf16_peak = bench.probes.peaks.bf16_gflops;
  std::string text = probes_text(bench.probes);
  text += "\n| shape | out x in | weights | rows | time | GB/s | of bandwidth | GFLOP/s | of bf16 peak | of dot peak | of sgemm |\n";
  text += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const KernelTiming& k : bench.kernels) {
    const double peak = dot_peak(bench.probes, k.weights);
    text += fmt::format("| {} | {}x{} | {} | {} | {:.1f} us | {:.1f} | {:.0f}% | {:.0f} | {:.0f}% | {:.0f}% | {} |\n", k.shape,
                        k.out, k.in, k.weights, k.rows, k.seconds * 1e6, k.gbs, 100 * k.gbs / bandwidth, k.gflops,
                        bf16_peak > 0 ? 100 * k.gflops / bf16_peak : 0.0, peak > 0 ? 100 * k.gflops / peak : 0.0,
                        k.of_sgemm ? fmt::format("{:.2f}x", *k.of_sgemm) : std::string(""));
  }
  text += fmt::format("\nGB/s: packed weight bytes (scales included) read per call / time, cycling through {} MiB of "
                      "copies of each matrix (up to 64 rows); bandwidth: the read probe above.\n",
                      bench.rotation_mib);
  return text;
}

nlohmann::json kernel_bench_json(const KernelBench& bench) {
  const double bandwidth = bench.probes.bandwidth.read_gbs;
  const double bf16_peak = bench.probes.peaks.bf16_gflops;
  nlohmann::json doc = probes_json(bench.probes);
  nlohmann::json results = nlohmann::json::array();
  for (const KernelTiming& k : bench.kernels)
    results.push_back({{"shape", k.shape}, {"out", k.out}, {"in", k.in}, {"weights", k.weights}, {"rows", k.rows},
                       {"seconds", k.seconds}, {"gbs", k.gbs}, {"of_bandwidth", k.gbs / bandwidth}, {"gflops", k.gflops},
                       {"of_bf16_peak", bf16_peak > 0 ? k.gflops / bf16_peak : 0.0},
                       {"of_dot_peak", dot_peak(bench.probes, k.weights) > 0 ? k.gflops / dot_peak(bench.probes, k.weights) : 0.0},
                       {"of_sgemm", k.of_sgemm ? nlohmann::json(*k.of_sgemm) : nlohmann::json(nullptr)}});
  doc["kernels"] = results;
  doc["rotation_mib"] = bench.rotation_mib;
  return doc;
}

}  // namespace inferlab::bench
