// Speed commands: `bench probes` (the machine's limits), `bench kernels` (each matmul kernel on the
// Qwen2.5-0.5B shapes beside those limits) and `bench engine` (llama-bench-style pp / tg tokens/s).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "command.h"
#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/probes.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/generation/generate.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"
#include "inferlab/util/process_memory.h"

using nlohmann::json;
namespace fast = inferlab::fast;

namespace inferlab::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Shape {
  const char* name;
  int out, in;
};
// Qwen2.5-0.5B, as the engine lays its layers out (q|k|v and gate|up fused into one matmul each).
const Shape kQwenShapes[] = {{"qkv", 1152, 896},      {"q", 896, 896},       {"kv", 128, 896},      {"o", 896, 896},
                             {"gate_up", 9728, 896},  {"down", 896, 4864},   {"lm_head", 151936, 896}};

void print_or_json(bool as_json, const json& doc, const std::string& text) {
  if (as_json) std::printf("%s\n", doc.dump(2).c_str());
  else std::fputs(text.c_str(), stdout);
}

json run_probes(int threads, bool quick, std::string& text) {
  fast::set_threads(threads);
  const auto bw = fast::measure_bandwidth(quick ? std::size_t(256) << 20 : std::size_t(1) << 30, quick ? 3 : 5);
  const auto peaks = fast::measure_peaks(quick ? 0.15 : 0.3);
  json doc;
  doc["threads"] = fast::threads();
  doc["cpu"] = fast::cpu_features_line();
  doc["bandwidth"] = {{"read_gbs", bw.read_gbs}, {"triad_gbs", bw.triad_gbs}, {"array_bytes", bw.bytes}};
  doc["peaks"] = {{"isa", peaks.isa},
                  {"bf16_gflops", peaks.bf16_gflops},
                  {"fp32_gflops", peaks.fp32_gflops},
                  {"int8_gops", peaks.int8_gops}};
  doc["openblas"] = {{"core", fast::openblas_core()}, {"config", fast::openblas_config()}};
  text += fmt::format("CPU kernels: {}\n", fast::cpu_features_line());
  text += fmt::format("OpenBLAS: core {} ({})\n", fast::openblas_core(), fast::openblas_config());
  text += fmt::format("threads: {}\n", fast::threads());
  text += fmt::format("memory read bandwidth (sum over {} MiB): {:.1f} GB/s; STREAM triad {:.1f} GB/s\n",
                      bw.bytes >> 20, bw.read_gbs, bw.triad_gbs);
  if (peaks.isa == "avx2")
    text += fmt::format("peak (AVX2): fp32 FMA {:.0f} GFLOP/s (bf16 weights run on it), int8 (vpmaddubsw+vpmaddwd) {:.0f} GOP/s\n",
                        peaks.fp32_gflops, peaks.int8_gops);
  else
    text += fmt::format("peak: bf16 dot (vdpbf16ps) {:.0f} GFLOP/s, fp32 FMA {:.0f} GFLOP/s, int8 (vpdpbusd) {:.0f} GOP/s\n",
                        peaks.bf16_gflops, peaks.fp32_gflops, peaks.int8_gops);
  // sgemm on the prefill shapes (512 prompt tokens).
  json gemms = json::array();
  for (const Shape& s : kQwenShapes) {
    if (std::string(s.name) == "lm_head" || std::string(s.name) == "q" || std::string(s.name) == "kv") continue;
    const auto g = fast::measure_sgemm(512, s.out, s.in, fast::threads(), quick ? 0.15 : 0.3);
    gemms.push_back({{"shape", s.name}, {"m", 512}, {"n", s.out}, {"k", s.in}, {"gflops", g.gflops}});
    text += fmt::format("OpenBLAS sgemm 512x{}x{} ({}): {:.0f} GFLOP/s\n", s.out, s.in, s.name, g.gflops);
  }
  doc["sgemm"] = gemms;
  return doc;
}

struct ProbesArgs {
  int threads = 0;
  bool json_output = false, quick = false;
};

struct KernelsArgs {
  int threads = 0;
  bool json_output = false, quick = false;
  std::vector<std::string> formats{"bf16", "int8", "q4"};
  std::vector<int> rows{1, 4, 16};
  std::vector<std::string> shapes;  // empty: all
  int prefill_rows = 512;
};

// Enough distinct copies of a matrix that cycling through them reads from DRAM, not the 32 MiB L3.
std::vector<fast::PackedMatrix> rotation(const std::vector<float>& w, const Shape& s, fast::WeightFormat format,
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
    const auto start = Clock::now();
    do {
      for (const auto& m : copies) fast::matmul(x.data(), rows, m, nullptr, y.data()), ++calls;
    } while (seconds_since(start) < min_seconds / 3);
    best = std::min(best, seconds_since(start) / calls);
  }
  return best;
}

void run_kernels(const KernelsArgs& args) {
  std::string text;
  json doc = run_probes(args.threads, args.quick, text);
  const double bandwidth = doc["bandwidth"]["read_gbs"].get<double>();
  const double bf16_peak = doc["peaks"]["bf16_gflops"].get<double>();
  std::map<std::string, double> sgemm;
  for (const auto& g : doc["sgemm"]) sgemm[g["shape"].get<std::string>()] = g["gflops"].get<double>();
  const double min_seconds = args.quick ? 0.1 : 0.3;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  json results = json::array();
  text += "\n| shape | out x in | weights | rows | time | GB/s | of bandwidth | GFLOP/s | of bf16 peak | of sgemm |\n";
  text += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Shape& s : kQwenShapes) {
    if (args.quick && std::string(s.name) == "lm_head") continue;
    if (!args.shapes.empty() && std::find(args.shapes.begin(), args.shapes.end(), s.name) == args.shapes.end()) continue;
    std::vector<float> w(static_cast<std::size_t>(s.out) * s.in);
    for (auto& v : w) v = dist(rng);
    for (const std::string& name : args.formats) {
      const fast::WeightFormat format = fast::parse_format(name);
      std::vector<int> row_counts = args.rows;
      const bool prefill = std::string(s.name) != "lm_head" && std::string(s.name) != "q" && std::string(s.name) != "kv";
      if (prefill && args.prefill_rows > 0) row_counts.push_back(args.prefill_rows);
      std::vector<fast::PackedMatrix> copies = rotation(w, s, format, std::size_t(192) << 20);
      for (int rows : row_counts) {
        // Many rows are compute-bound: one copy is enough (and keeps packing time down).
        if (rows > 64 && copies.size() > 1) copies.resize(1);
        std::vector<float> x(static_cast<std::size_t>(rows) * s.in), y(static_cast<std::size_t>(rows) * s.out);
        for (auto& v : x) v = dist(rng) * 50;
        const double t = time_matmuls(copies, x, rows, y, min_seconds);
        const double gbs = copies.front().bytes() / t / 1e9;
        const double gflops = 2.0 * rows * s.out * s.in / t / 1e9;
        const double of_sgemm = sgemm.count(s.name) && rows >= 64 ? gflops / sgemm[s.name] : NAN;
        results.push_back({{"shape", s.name}, {"out", s.out}, {"in", s.in}, {"weights", name}, {"rows", rows},
                           {"seconds", t}, {"gbs", gbs}, {"of_bandwidth", gbs / bandwidth}, {"gflops", gflops},
                           {"of_bf16_peak", bf16_peak > 0 ? gflops / bf16_peak : 0.0},
                           {"of_sgemm", std::isnan(of_sgemm) ? json(nullptr) : json(of_sgemm)}});
        text += fmt::format("| {} | {}x{} | {} | {} | {:.1f} us | {:.1f} | {:.0f}% | {:.0f} | {:.0f}% | {} |\n", s.name,
                            s.out, s.in, name, rows, t * 1e6, gbs, 100 * gbs / bandwidth, gflops,
                            bf16_peak > 0 ? 100 * gflops / bf16_peak : 0.0,
                            std::isnan(of_sgemm) ? std::string("") : fmt::format("{:.2f}x", of_sgemm));
      }
    }
  }
  doc["kernels"] = results;
  text += "\nGB/s: packed weight bytes (scales included) read per call / time; bandwidth: the read probe above.\n";
  print_or_json(args.json_output, doc, text);
}

struct EngineArgs {
  std::string model;
  int prompt = 512, gen = 128, threads = 0, repeats = 5;
  std::string weights = "auto";
  bool json_output = false;
};

// Matmul weights read from memory per decoded token (every layer's projections and the lm_head):
// what bounds decode speed. Norms and biases are negligible and left out.
double decode_weight_params(const ModelConfig& c) {
  const double H = c.hidden_size, q = static_cast<double>(c.num_heads) * c.head_dim,
               kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  const double I = c.intermediate_size > 0 ? c.intermediate_size : 4 * H;
  const double per_layer = c.architecture == "gpt2" ? H * 3 * H + H * H + 2 * H * I : H * (q + 2 * kv) + q * H + 3 * H * I;
  return per_layer * c.num_layers + static_cast<double>(c.vocab_size) * H;
}

struct Stats {
  double mean = 0, stddev = 0;
  std::vector<double> samples;
};
Stats stats_of(std::vector<double> samples) {
  Stats s;
  s.samples = samples;
  for (double v : samples) s.mean += v;
  s.mean /= samples.size();
  for (double v : samples) s.stddev += (v - s.mean) * (v - s.mean);
  s.stddev = samples.size() > 1 ? std::sqrt(s.stddev / (samples.size() - 1)) : 0.0;
  return s;
}

void run_engine_bench(const EngineArgs& args) {
  if (args.prompt < 0 || args.gen < 0 || (args.prompt == 0 && args.gen == 0))
    fail("bench engine: -p and -n must be >= 0 and not both 0 (got -p {} -n {})", args.prompt, args.gen);
  if (args.repeats <= 0) fail("bench engine: -r must be positive, got {}", args.repeats);
  if (args.threads < 0) fail("bench engine: -t must be 0 (all cores) or positive, got {}", args.threads);
  LoadOptions options;
  options.threads = args.threads;
  options.weights = args.weights;
  const auto load_start = Clock::now();
  std::unique_ptr<Model> model = Model::load(args.model, options);
  const double load_seconds = seconds_since(load_start);
  const int64_t rss_after_load = peak_resident_bytes();
  const ModelConfig& c = model->config();
  const int context = args.prompt + args.gen;
  if (c.max_position_embeddings > 0 && context > c.max_position_embeddings)
    fail("bench engine: -p {} + -n {} exceeds the model's context of {} positions", args.prompt, args.gen,
         c.max_position_embeddings);
  KVCache cache(c, static_cast<std::size_t>(std::max(args.prompt, args.gen)) + 16);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt(args.prompt);
  for (auto& t : prompt) t = token(rng);

  auto run_pp = [&] {
    SequenceKV seq;
    if (!seq.reserve(cache, args.prompt)) fail("bench engine: KV cache too small for {} positions", args.prompt);
    const BatchEntry entry{prompt, &seq, false};
    const auto start = Clock::now();
    model->forward(std::span(&entry, 1), cache);
    const double t = seconds_since(start);
    seq.release(cache);
    return args.prompt / t;
  };
  auto run_tg = [&](int n) {
    SequenceKV seq;
    int32_t next = prompt.empty() ? 0 : prompt[0];
    const auto start = Clock::now();
    for (int i = 0; i < n; ++i) {
      if (!seq.reserve(cache, 1)) fail("bench engine: KV cache too small for {} positions", n);
      const BatchEntry entry{std::span(&next, 1), &seq, false};
      next = argmax(model->forward(std::span(&entry, 1), cache));
    }
    const double t = seconds_since(start);
    seq.release(cache);
    return n / t;
  };
  std::vector<std::pair<std::string, Stats>> results;
  if (args.prompt > 0) {
    run_pp();  // warm-up: page in weights, grow scratch buffers
    std::vector<double> samples;
    for (int r = 0; r < args.repeats; ++r) samples.push_back(run_pp());
    results.emplace_back(fmt::format("pp{}", args.prompt), stats_of(samples));
  }
  if (args.gen > 0) {
    run_tg(std::min(args.gen, 8));
    std::vector<double> samples;
    for (int r = 0; r < args.repeats; ++r) samples.push_back(run_tg(args.gen));
    results.emplace_back(fmt::format("tg{}", args.gen), stats_of(samples));
  }

  const std::string format = args.weights;
  const double params = decode_weight_params(c);
  const int64_t peak = peak_resident_bytes();
  json doc;
  doc["model"] = args.model;
  doc["architecture"] = c.architecture;
  doc["weights"] = format;
  doc["threads"] = fast::threads();
  doc["kernels"] = fast::cpu_features_line();
  doc["matmul_params"] = params;
  doc["lm_head_params"] = static_cast<double>(c.vocab_size) * c.hidden_size;  // once per prompt, not per prompt token
  doc["load_seconds"] = load_seconds;
  doc["rss_after_load_bytes"] = rss_after_load;
  doc["peak_rss_bytes"] = peak;
  doc["kv_cache_bytes"] = cache.bytes();
  json tests = json::array();
  std::string text = "| model | matmul params | weights | threads | test | t/s |\n|---|---|---|---|---|---|\n";
  for (const auto& [name, st] : results) {
    tests.push_back({{"test", name}, {"n_prompt", name[0] == 'p' ? args.prompt : 0}, {"n_gen", name[0] == 't' ? args.gen : 0},
                     {"avg_ts", st.mean}, {"stddev_ts", st.stddev}, {"samples_ts", st.samples}});
    text += fmt::format("| {} | {:.2f} M | {} | {} | {} | {:.2f} ± {:.2f} |\n", c.architecture, params / 1e6, format,
                        fast::threads(), name, st.mean, st.stddev);
  }
  doc["results"] = tests;
  text += fmt::format("\nload {:.2f} s; peak RSS {:.1f} MiB (after load {:.1f} MiB; KV cache {:.1f} MiB); kernels: {}\n",
                      load_seconds, peak / 1048576.0, rss_after_load / 1048576.0, cache.bytes() / 1048576.0,
                      fast::cpu_features_line());
  print_or_json(args.json_output, doc, text);
}

struct AccuracyArgs {
  std::string model;
  std::vector<std::string> formats{"bf16", "int8", "q4"};
  int prompt_len = 32, steps = 32, threads = 0;
  uint32_t seed = 1;
  bool json_output = false;
};

std::unique_ptr<Model> load_with(const std::string& model, const std::string& weights, int threads) {
  LoadOptions options;
  options.threads = threads;
  options.weights = weights;
  return Model::load(model, options);
}

// Each weight format against the same model at f32: logits over a prompt and greedy tokens.
void run_accuracy(const AccuracyArgs& args) {
  if (args.prompt_len <= 0 || args.steps < 0) fail("bench accuracy: --prompt-len must be positive and --steps >= 0");
  auto reference = load_with(args.model, "f32", args.threads);
  const ModelConfig& c = reference->config();
  std::mt19937 rng(args.seed);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt(args.prompt_len);
  for (auto& t : prompt) t = token(rng);
  GenerateOptions gen;
  gen.max_new_tokens = args.steps;
  gen.ignore_eos = true;
  const std::vector<float> ref_logits = prompt_logits(*reference, prompt);
  const std::vector<int32_t> ref_tokens = generate_greedy(*reference, prompt, gen).tokens;
  reference.reset();
  const std::size_t vocab = c.vocab_size;
  double ref_max = 0;
  for (float v : ref_logits) ref_max = std::max(ref_max, static_cast<double>(std::fabs(v)));
  json rows = json::array();
  std::string text = fmt::format("{}: {} prompt positions (seed {}), {} greedy steps; reference: the same model at f32\n\n",
                                 args.model, args.prompt_len, args.seed, args.steps);
  text += "| weights | max abs logit diff | of max abs logit | rms diff | prompt top-1 agree | greedy tokens equal | first divergence |\n";
  text += "|---|---|---|---|---|---|---|\n";
  for (const std::string& format : args.formats) {
    auto model = load_with(args.model, format, args.threads);
    const std::vector<float> logits = prompt_logits(*model, prompt);
    double max_diff = 0, sq = 0;
    int agree = 0;
    for (int p = 0; p < args.prompt_len; ++p) {
      const std::span<const float> a(&ref_logits[p * vocab], vocab), b(&logits[p * vocab], vocab);
      for (std::size_t i = 0; i < vocab; ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        max_diff = std::max(max_diff, d);
        sq += d * d;
      }
      agree += argmax(a) == argmax(b);
    }
    const std::vector<int32_t> tokens = generate_greedy(*model, prompt, gen).tokens;
    int equal = 0, first = -1;
    for (std::size_t i = 0; i < tokens.size() && i < ref_tokens.size(); ++i) {
      if (tokens[i] == ref_tokens[i]) ++equal;
      else if (first < 0) first = static_cast<int>(i);
    }
    const double rms = std::sqrt(sq / (static_cast<double>(args.prompt_len) * vocab));
    rows.push_back({{"weights", format}, {"max_abs_logit_diff", max_diff}, {"max_abs_logit", ref_max}, {"rms_logit_diff", rms},
                    {"prompt_top1_agree", agree}, {"prompt_positions", args.prompt_len}, {"greedy_equal", equal},
                    {"greedy_steps", args.steps}, {"first_divergence", first}});
    text += fmt::format("| {} | {:.3g} | {:.2g} | {:.3g} | {}/{} | {}/{} | {} |\n", format, max_diff, max_diff / ref_max, rms,
                        agree, args.prompt_len, equal, args.steps, first < 0 ? std::string("none") : std::to_string(first));
  }
  print_or_json(args.json_output, json{{"model", args.model}, {"results", rows}}, text);
}

}  // namespace

Registrar reg_speed([](CLI::App& app) {
  CLI::App& bench = command_group(app, "bench", "Benchmarks and measurements");

  auto probes = std::make_shared<ProbesArgs>();
  CLI::App* p = bench.add_subcommand("probes", "The machine's limits: memory bandwidth, OpenBLAS sgemm, bf16/fp32/int8 peaks");
  p->add_option("--threads,-t", probes->threads, "Threads (0: all cores)")->capture_default_str();
  p->add_flag("--json", probes->json_output, "Print one JSON object");
  p->add_flag("--quick", probes->quick, "Smaller arrays and shorter timing (noisier)");
  p->callback([probes] {
    std::string text;
    const json doc = run_probes(probes->threads, probes->quick, text);
    print_or_json(probes->json_output, doc, text);
  });

  auto engine = std::make_shared<EngineArgs>();
  CLI::App* e = bench.add_subcommand("engine", "llama-bench style: prompt processing (pp) and generation (tg) tokens/s, peak RSS");
  e->add_option("model", engine->model, "Model folder or HF repo id in the local cache")->required();
  e->add_option("-p,--n-prompt", engine->prompt, "Prompt tokens processed in one forward (0: skip pp)")->capture_default_str();
  e->add_option("-n,--n-gen", engine->gen, "Tokens generated one at a time from an empty cache (0: skip tg)")->capture_default_str();
  e->add_option("-t,--threads", engine->threads, "Threads (0: all cores)")->capture_default_str();
  e->add_option("-r,--repetitions", engine->repeats, "Measured runs per test (after one warm-up)")->capture_default_str();
  e->add_option("--weights,--dtype", engine->weights, "Matmul weights: auto (as stored), f32, bf16, int8, q4")->capture_default_str();
  e->add_flag("--json", engine->json_output, "Print one JSON object");
  e->callback([engine] { run_engine_bench(*engine); });

  auto accuracy = std::make_shared<AccuracyArgs>();
  CLI::App* a = bench.add_subcommand("accuracy", "What each weight format costs: logits and greedy tokens against f32");
  a->add_option("model", accuracy->model, "Model folder, llama2.c .bin, or HF repo id in the local cache")->required();
  a->add_option("--weights", accuracy->formats, "Formats to compare with f32")->delimiter(',')->capture_default_str();
  a->add_option("--prompt-len", accuracy->prompt_len, "Random prompt positions compared")->capture_default_str();
  a->add_option("--steps", accuracy->steps, "Greedy steps compared")->capture_default_str();
  a->add_option("--seed", accuracy->seed, "Seed of the random prompt")->capture_default_str();
  a->add_option("-t,--threads", accuracy->threads, "Threads (0: all cores)")->capture_default_str();
  a->add_flag("--json", accuracy->json_output, "Print one JSON object");
  a->callback([accuracy] { run_accuracy(*accuracy); });

  auto kernels = std::make_shared<KernelsArgs>();
  CLI::App* k = bench.add_subcommand("kernels", "Matmul kernels on the Qwen2.5-0.5B shapes: GB/s and GFLOP/s beside the probes");
  k->add_option("--threads,-t", kernels->threads, "Threads (0: all cores)")->capture_default_str();
  k->add_option("--weights", kernels->formats, "Weight formats: bf16, int8, q4")->delimiter(',')->capture_default_str();
  k->add_option("--rows", kernels->rows, "Decode batch sizes (rows of activations)")->delimiter(',')->capture_default_str();
  k->add_option("--shapes", kernels->shapes, "Only these shapes: qkv, q, kv, o, gate_up, down, lm_head")->delimiter(',');
  k->add_option("--prefill-rows", kernels->prefill_rows, "Rows for the prefill GEMM case (0: skip)")->capture_default_str();
  k->add_flag("--json", kernels->json_output, "Print one JSON object");
  k->add_flag("--quick", kernels->quick, "Skip lm_head, shorter timing (noisier)");
  k->callback([kernels] {
    for (int r : kernels->rows)
      if (r <= 0) fail("--rows: {} is not a positive row count", r);
    run_kernels(*kernels);
  });
});

}  // namespace inferlab::cli
