// `inferlab bench engine`, llama-bench style: prompt processing (pp: the whole prompt in one
// forward) and token generation (tg: one token at a time) in tokens/s, from an empty cache or after
// `depth` cached positions (llama-bench's -d: decode at a long context reads the K/V of every
// position besides the weights), the mean and sample standard deviation over repetitions after a
// warm-up, and the peak RSS.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/model/kv_cache.h"

namespace inferlab::bench {

struct EngineBenchOptions {
  std::string model;  // folder or HF repo id in the local cache
  int prompt = 512, gen = 128;  // 0 skips pp / tg
  // Positions in the KV cache before each pp / tg run (filled untimed), one pair of tests per depth
  // (llama-bench's -d 0,8192,32768): decode at 8k and 32k positions.
  std::vector<int> depths{0};
  KVType kv_type = KVType::F32;  // the cache's elements
  int threads = 0, repeats = 5;
  std::string weights = "auto";
  std::string output_weights = "auto";  // LoadOptions::output_weights
  // With a text file: the format's KL divergence from f32 on it (inferlab perplexity's method, the
  // first quality_chunks chunks of quality_ctx tokens), printed beside the speed.
  std::string quality_text;
  int quality_ctx = 256, quality_chunks = 4;
  // Measure the memory read bandwidth (fast::ReadProbe, over as many bytes as decode reads per
  // token) before each tg repetition and after the last, and give decode's share of it per
  // repetition, against the mean of the probes on either side: the host's bandwidth drifts too
  // much for one probe minutes apart to be the reference. After each probe, 16 untimed steps win
  // back the part of the L3 the probe's sweeps took.
  bool bandwidth = false;
};

struct EngineQuality {
  double ppl = 0, ppl_f32 = 0, mean_kld = 0, p99_kld = 0, same_top = 0;
  std::size_t positions = 0;
};

struct EngineTest {
  std::string name;  // "pp512", "tg128", "tg128 @ d1024"
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  // K/V bytes a tg run reads per token, on average over its positions (depth + its own).
  std::size_t kv_bytes_per_token = 0;
  double mean_ts = 0, stddev_ts = 0;
  std::vector<double> samples_ts;
  // tg with EngineBenchOptions::bandwidth: per repetition, the probe's GB/s around it and decode's
  // share of that (tokens/s x decode_weight_bytes / GB/s).
  std::vector<double> bandwidth_gbs, bandwidth_share;
};

struct EngineBench {
  EngineBenchOptions options;
  std::string architecture;
  int threads = 0;
  std::string kernels;           // the CPU features line
  double matmul_params = 0;      // weights read per decoded token
  std::string output_weights;    // the lm_head's format, resolved
  double lm_head_params = 0;
  std::size_t decode_weight_bytes = 0;  // Model::decode_weight_bytes: read per decoded token
  std::size_t probe_bytes = 0;          // the read probe's array (options.bandwidth; fast::read_probe_bytes)
  std::string weight_formats;           // Model::weight_formats: those bytes by format
  double load_seconds = 0;
  int64_t rss_after_load_bytes = 0, peak_rss_bytes = 0;
  std::optional<int64_t> huge_pages_after_load_bytes;  // resident on transparent huge pages (unknown: nullopt)
  std::size_t kv_cache_bytes = 0;
  std::vector<EngineTest> tests;
  std::optional<EngineQuality> quality;  // with options.quality_text
};

// Throws Error on bad options or a context the model does not have.
EngineBench run_engine_bench(const EngineBenchOptions& options);
std::string engine_bench_text(const EngineBench& bench);
nlohmann::json engine_bench_json(const EngineBench& bench);

}  // namespace inferlab::bench
