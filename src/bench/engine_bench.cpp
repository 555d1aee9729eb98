#include "inferlab/bench/engine_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "lab/timing.h"
#include "inferlab/bench/perplexity.h"
#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/probes.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "inferlab/util/error.h"
#include "inferlab/util/process_memory.h"
#include "inferlab/util/stats.h"

namespace inferlab::bench {

using lab::seconds_since;  // the soak measures with the same clock

namespace {

// Untimed decode steps after each bandwidth probe (run_engine_bench).
constexpr int kRewarmSteps = 16;

using Clock = std::chrono::steady_clock;

// Matmul weights read from memory per decoded token (every layer's projections and the lm_head):
// what bounds decode speed. Norms and biases are negligible and left out.
double decode_weight_params(const ModelConfig& c) {
  const double H = c.hidden_size, q = static_cast<double>(c.num_heads) * c.head_dim,
               kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  const double I = c.intermediate_size > 0 ? c.intermediate_size : 4 * H;
  const double per_layer = c.architecture == "gpt2" ? H * 3 * H + H * H + 2 * H * I : H * (q + 2 * kv) + q * H + 3 * H * I;
  return per_layer * c.num_layers + static_cast<double>(c.vocab_size) * H;
}

EngineTest summarize_test(int n_prompt, int n_gen, int n_depth, std::vector<double> samples) {
  EngineTest test;
  test.name = n_prompt > 0 ? fmt::format("pp{}", n_prompt) : fmt::format("tg{}", n_gen);
  if (n_depth > 0) test.name += fmt::format(" @ d{}", n_depth);  // llama-bench's name for it
  test.n_prompt = n_prompt;
  test.n_gen = n_gen;
  test.n_depth = n_depth;
  test.mean_ts = mean(samples);
  test.stddev_ts = sample_stddev(samples);
  test.samples_ts = std::move(samples);
  return test;
}

// The format's KL divergence from f32 on a text: an f32 reference run saved to a temporary file, then
// the format's run compared with it (compute_perplexity, as `inferlab perplexity` does).
EngineQuality measure_quality(const EngineBenchOptions& args) {
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() / fmt::format("inferlab-engine-kld-{}.bin", static_cast<long>(getpid()));
  PerplexityOptions p;
  p.model = args.model;
  p.file = args.quality_text;
  p.ctx = args.quality_ctx;
  p.chunks = args.quality_chunks;
  p.threads = args.threads;
  p.weights = "f32";
  p.kl_base_out = base.string();
  EngineQuality q;
  try {
    q.ppl_f32 = compute_perplexity(p).ppl;
    p.kl_base_out.clear();
    p.kl_base_in = base.string();
    p.weights = args.weights;
    p.output_weights = args.output_weights;
    const PerplexityResult r = compute_perplexity(p);
    q.ppl = r.ppl;
    q.mean_kld = r.kld->mean;
    q.p99_kld = r.kld->p99;
    q.same_top = r.kld->same_top;
    q.positions = r.scored;
  } catch (...) {
    std::filesystem::remove(base);
    throw;
  }
  std::filesystem::remove(base);
  return q;
}

}  // namespace

EngineBench run_engine_bench(const EngineBenchOptions& args) {
  if (args.prompt < 0 || args.gen < 0 || (args.prompt == 0 && args.gen == 0))
    fail("bench engine: -p and -n must be >= 0 and not both 0 (got -p {} -n {})", args.prompt, args.gen);
  std::vector<int> depths = args.depths.empty() ? std::vector<int>{0} : args.depths;
  for (int d : depths)
    if (d < 0) fail("bench engine: -d must be >= 0, got {}", d);
  // Shallow to deep: one sequence is filled up to each depth in turn, never refilled from 0.
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  if (args.repeats <= 0) fail("bench engine: -r must be positive, got {}", args.repeats);
  if (args.threads < 0) fail("bench engine: -t must be 0 (all cores) or positive, got {}", args.threads);
  LoadOptions options;
  options.threads = args.threads;
  options.weights = args.weights;
  options.output_weights = args.output_weights;
  EngineBench bench;
  bench.options = args;
  const auto load_start = Clock::now();
  std::unique_ptr<Model> model = Model::load(args.model, options);
  bench.load_seconds = seconds_since(load_start);
  bench.rss_after_load_bytes = peak_resident_bytes();
  bench.huge_pages_after_load_bytes = huge_page_bytes();
  const ModelConfig& c = model->config();
  // pp and tg run apart, each after the depth's positions.
  const int deepest = depths.back();
  const int context = deepest + std::max(args.prompt, args.gen);
  if (c.max_position_embeddings > 0 && context > c.max_position_embeddings)
    fail("bench engine: -d {} + {} exceeds the model's context of {} positions (max_position_embeddings; a "
         "rope_scaling of type yarn makes it factor x original_max_position_embeddings)",
         deepest, args.prompt >= args.gen ? fmt::format("-p {}", args.prompt) : fmt::format("-n {}", args.gen),
         c.max_position_embeddings);
  KVCache cache(c, static_cast<std::size_t>(context) + 16, 16, args.kv_type, model->backend());
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt(args.prompt), filler(deepest);
  for (auto& t : prompt) t = token(rng);
  for (auto& t : filler) t = token(rng);

  // The sequence that holds the depth's positions, filled (untimed) in forwards of at most 512 (as
  // a server's chunked prefill), so the activations stay small at any depth. Each run appends to it
  // and is cut back to the depth after: its positions are written over by the next.
  SequenceKV deep;
  auto fill_to = [&](int depth) {
    if (!deep.reserve(cache, depth - deep.length)) fail("bench engine: KV cache too small for {} positions", depth);
    while (deep.length < depth) {
      const int n = std::min(512, depth - deep.length);
      const BatchEntry entry{std::span(filler).subspan(deep.length, n), &deep, EntryOutput::last_logits};
      model->forward(std::span(&entry, 1), cache);
    }
  };
  bench.decode_weight_bytes = model->decode_weight_bytes();
  bench.weight_formats = model->weight_formats();
  int64_t probe_peak_before = 0;
  std::optional<fast::ReadProbe> probe;
  if (args.gen > 0 && args.bandwidth) {
    // The probe's array stays resident until the end: the peak RSS reported is the engine's.
    probe_peak_before = peak_resident_bytes();
    // As large as the weights one token reads: a sweep over them gets what part of them the
    // L3 holds, and so must the probe (docs/speed.md, "The probe's size").
    probe.emplace(fast::read_probe_bytes(bench.decode_weight_bytes));
    bench.probe_bytes = probe->bytes();
  }
  for (const int depth : depths) {
    fill_to(depth);
    auto run_pp = [&] {
      if (!deep.reserve(cache, args.prompt)) fail("bench engine: KV cache too small for {} positions", args.prompt);
      const BatchEntry entry{prompt, &deep, EntryOutput::last_logits};
      const auto start = Clock::now();
      model->forward(std::span(&entry, 1), cache);
      const double t = seconds_since(start);
      deep.length = depth;
      return args.prompt / t;
    };
    auto run_tg = [&](int n) {
      int32_t next = prompt.empty() ? 0 : prompt[0];
      std::vector<float> logits;  // reused, as a server's engine does
      if (!deep.reserve(cache, n)) fail("bench engine: KV cache too small for {} positions", n);
      const auto start = Clock::now();
      for (int i = 0; i < n; ++i) {
        const BatchEntry entry{std::span(&next, 1), &deep, EntryOutput::last_logits};
        model->forward_into(std::span(&entry, 1), cache, logits);
        next = argmax(logits);
      }
      const double t = seconds_since(start);
      deep.length = depth;
      return n / t;
    };
    if (args.prompt > 0) {
      run_pp();  // warm-up: page in weights, grow scratch buffers
      std::vector<double> samples;
      for (int r = 0; r < args.repeats; ++r) samples.push_back(run_pp());
      bench.tests.push_back(summarize_test(args.prompt, 0, depth, std::move(samples)));
    }
    if (args.gen > 0) {
      std::vector<double> probes;  // before each repetition and after the last
      run_tg(std::min(args.gen, 8));
      std::vector<double> samples;
      for (int r = 0; r < args.repeats; ++r) {
        if (probe) {
          probes.push_back(probe->measure());
          // The probe's sweeps pushed the weights out of the L3; a model not far above the L3's size
          // takes about ten sweeps to win its part back (a 330 MiB array on a 300 MiB L3 read 17.6
          // GB/s on its first pass, 25 on its tenth), so these steps are not timed.
          run_tg(std::min(args.gen, kRewarmSteps));
        }
        samples.push_back(run_tg(args.gen));
      }
      EngineTest tg = summarize_test(0, args.gen, depth, std::move(samples));
      // Step i attends to depth + i + 1 positions.
      tg.kv_bytes_per_token = static_cast<std::size_t>(static_cast<double>(cache.bytes_per_token()) * (depth + (args.gen + 1) / 2.0));
      if (probe) {
        probes.push_back(probe->measure());
        for (int r = 0; r < args.repeats; ++r) {
          const double gbs = (probes[r] + probes[r + 1]) / 2;
          tg.bandwidth_gbs.push_back(gbs);
          tg.bandwidth_share.push_back(tg.samples_ts[r] * static_cast<double>(bench.decode_weight_bytes) / 1e9 / gbs);
        }
      }
      bench.tests.push_back(std::move(tg));
    }
  }
  deep.release(cache);
  bench.architecture = c.architecture;
  bench.threads = fast::threads();
  bench.kernels = fast::cpu_features_line();
  bench.matmul_params = decode_weight_params(c);
  bench.output_weights = output_weights_of(options);
  bench.lm_head_params = static_cast<double>(c.vocab_size) * c.hidden_size;  // once per prompt, not per prompt token
  bench.peak_rss_bytes = std::max(probe_peak_before, peak_resident_bytes() - static_cast<int64_t>(bench.probe_bytes));
  bench.kv_cache_bytes = cache.bytes();
  if (!args.quality_text.empty()) bench.quality = measure_quality(args);
  return bench;
}

std::string engine_bench_text(const EngineBench& b) {
  std::string text = "| model | matmul params | weights | threads | test | t/s |\n|---|---|---|---|---|---|\n";
  for (const EngineTest& t : b.tests)
    text += fmt::format("| {} | {:.2f} M | {}{} | {} | {} | {:.2f} ± {:.2f} |\n", b.architecture, b.matmul_params / 1e6,
                        b.options.weights, b.output_weights == b.options.weights ? "" : ", output " + b.output_weights,
                        b.threads, t.name, t.mean_ts, t.stddev_ts);
  for (const EngineTest& t : b.tests) {
    if (t.n_gen == 0) continue;
    text += fmt::format("\n{}: {:.1f} MB of weights per token ({}), {:.1f} GB/s", t.name, b.decode_weight_bytes / 1e6,
                        b.weight_formats, t.mean_ts * b.decode_weight_bytes / 1e9);
    if (t.n_depth > 0)  // not in the share below, which is the weights' (the measure of decode)
      text += fmt::format(" (and {:.2f} MB of K/V per token, {:.2f} GB/s)", t.kv_bytes_per_token / 1e6,
                          t.mean_ts * t.kv_bytes_per_token / 1e9);
    if (!t.bandwidth_share.empty()) {
      const auto [low, high] = std::minmax_element(t.bandwidth_share.begin(), t.bandwidth_share.end());
      const auto [bw_low, bw_high] = std::minmax_element(t.bandwidth_gbs.begin(), t.bandwidth_gbs.end());
      text += fmt::format("; {:.0f} % of the read bandwidth (median of {} repetitions, each against the probes on "
                          "either side; range {:.0f}-{:.0f} %, probes {:.1f}-{:.1f} GB/s over {:.0f} MiB)",
                          100 * median(t.bandwidth_share), t.bandwidth_share.size(), 100 * *low, 100 * *high, *bw_low,
                          *bw_high, b.probe_bytes / 1048576.0);
    }
    text += "\n";
  }
  const std::string huge = b.huge_pages_after_load_bytes
                               ? fmt::format("{:.0f} MiB on 2 MiB pages", *b.huge_pages_after_load_bytes / 1048576.0)
                               : "huge pages unknown";
  text += fmt::format("\nload {:.2f} s; peak RSS {:.1f} MiB (after load {:.1f} MiB, {}; KV cache {:.1f} MiB {}); kernels: {}\n",
                      b.load_seconds, b.peak_rss_bytes / 1048576.0, b.rss_after_load_bytes / 1048576.0, huge,
                      b.kv_cache_bytes / 1048576.0, kv_type_name(b.options.kv_type), b.kernels);
  if (b.quality)
    text += fmt::format("quality of {} against f32 on {} ({} positions, ctx {}): mean KLD {:.6f}, 99% KLD {:.6f}, "
                        "same top token {:.2f} %, PPL {:.4f} (f32 {:.4f})\n",
                        b.options.weights, b.options.quality_text, b.quality->positions, b.options.quality_ctx,
                        b.quality->mean_kld, b.quality->p99_kld, 100 * b.quality->same_top, b.quality->ppl,
                        b.quality->ppl_f32);
  return text;
}

nlohmann::json engine_bench_json(const EngineBench& b) {
  nlohmann::json doc;
  doc["model"] = b.options.model;
  doc["architecture"] = b.architecture;
  doc["weights"] = b.options.weights;
  doc["output_weights"] = b.output_weights;  // the lm_head's format (LoadOptions::output_weights resolved)
  doc["weight_formats"] = b.weight_formats;  // decode's bytes by the format they are held in
  doc["threads"] = b.threads;
  doc["kernels"] = b.kernels;
  doc["matmul_params"] = b.matmul_params;
  doc["lm_head_params"] = b.lm_head_params;
  doc["decode_weight_bytes"] = b.decode_weight_bytes;
  if (b.probe_bytes > 0) doc["bandwidth_probe_bytes"] = b.probe_bytes;  // the read probe's array (with --bandwidth)
  doc["load_seconds"] = b.load_seconds;
  doc["rss_after_load_bytes"] = b.rss_after_load_bytes;
  doc["huge_pages_after_load_bytes"] =
      b.huge_pages_after_load_bytes ? nlohmann::json(*b.huge_pages_after_load_bytes) : nlohmann::json(nullptr);
  doc["peak_rss_bytes"] = b.peak_rss_bytes;
  doc["kv_cache_bytes"] = b.kv_cache_bytes;
  doc["kv_type"] = kv_type_name(b.options.kv_type);
  nlohmann::json tests = nlohmann::json::array();
  for (const EngineTest& t : b.tests) {
    nlohmann::json test = {{"test", t.name}, {"n_prompt", t.n_prompt}, {"n_gen", t.n_gen}, {"n_depth", t.n_depth},
                           {"avg_ts", t.mean_ts}, {"stddev_ts", t.stddev_ts}, {"samples_ts", t.samples_ts}};
    if (t.n_gen > 0) test["kv_bytes_per_token"] = t.kv_bytes_per_token;
    if (!t.bandwidth_share.empty()) {
      test["bandwidth_gbs"] = t.bandwidth_gbs;  // per repetition: the mean of the probes before and after it
      test["bandwidth_share"] = t.bandwidth_share;
      test["median_bandwidth_share"] = median(t.bandwidth_share);
    }
    tests.push_back(std::move(test));
  }
  doc["results"] = tests;
  if (b.quality)
    doc["quality"] = {{"text", b.options.quality_text}, {"ctx", b.options.quality_ctx}, {"positions", b.quality->positions},
                      {"mean_kld", b.quality->mean_kld}, {"p99_kld", b.quality->p99_kld},
                      {"same_top", b.quality->same_top}, {"ppl", b.quality->ppl}, {"ppl_f32", b.quality->ppl_f32}};
  return doc;
}

}  // namespace inferlab::bench
