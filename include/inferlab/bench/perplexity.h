// `inferlab perplexity`: llama.cpp's llama-perplexity method on a text file, and the KL divergence of
// one weight format's next-token distributions from a saved reference run (llama-perplexity's
// --kl-divergence-base / --kl-divergence), with the statistics llama.cpp prints.
//
// Method (as tools/perplexity in llama.cpp): the whole file is tokenized once (with the tokenizer's
// special tokens, i.e. a BOS where the model adds one); it is cut into chunks of ctx tokens (the
// tail that does not fill a chunk is dropped); where the model adds a BOS, each chunk's first token
// is replaced by it; each chunk runs as one sequence from an empty cache, and only the second half
// is scored: the logits at positions ctx/2 .. ctx-2 predict tokens ctx/2+1 .. ctx-1.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace inferlab::bench {

struct PerplexityProgress {
  int chunk = 0, chunks = 0;  // chunk is 1-based: chunks done
  double ppl = 0, seconds = 0;
};

struct PerplexityOptions {
  std::string model;
  std::string file;              // the text
  int ctx = 512;
  std::string weights = "auto";  // LoadOptions::weights: auto, f32, bf16, int8, q4
  std::string output_weights = "auto";  // LoadOptions::output_weights
  int threads = 0;
  int chunks = -1;               // at most this many chunks (-1: all)
  // Write every scored position's full log-probabilities here (the reference run) ...
  std::string kl_base_out;
  // ... or read them from here and compare this run's distributions with them.
  std::string kl_base_in;
  std::function<void(const PerplexityProgress&)> on_progress;
};

// The statistics of llama-perplexity --kl-divergence, over every scored position.
struct KlDivergence {
  double ppl_base = 0, ppl_base_err = 0;
  double ln_ratio = 0, ln_ratio_err = 0;  // mean ln(PPL(Q)/PPL(base))
  double dppl = 0, dppl_err = 0;          // PPL(Q) - PPL(base)
  double mean = 0, mean_err = 0, median = 0, p99 = 0, p999 = 0, max = 0;
  double same_top = 0, same_top_err = 0;  // fraction of positions with the same top token
  double rms_dp = 0;                      // RMS of p(correct token) - p_base(correct token)
};

struct PerplexityResult {
  PerplexityOptions options;
  std::string weights_used;  // the format the model ran in
  bool add_bos = false;
  std::size_t text_tokens = 0, scored = 0;
  int chunks = 0, vocab = 0;
  double ppl = 0, ppl_err = 0, nll = 0;  // nll: mean negative log-likelihood (nats)
  double forward_seconds = 0;            // model forward passes only
  double loop_seconds = 0;               // the whole chunk loop: forward, scoring, the KL file
  double tokens_per_second = 0;          // chunk tokens / forward_seconds (prompt processing)
  std::optional<KlDivergence> kld;
};

// Throws inferlab::Error for a missing or too short file, a bad ctx, or a KL base file that does not
// match (another model's vocabulary, another ctx, other tokens).
PerplexityResult compute_perplexity(const PerplexityOptions& options);
std::string perplexity_text(const PerplexityResult& result);
nlohmann::json perplexity_json(const PerplexityResult& result);

// One position's log-probabilities from logits (log-softmax in double, stored as float): the
// reference run writes them and the compared run computes its own the same way, so a format
// compared with itself has a KL divergence of exactly 0.
void log_probabilities(const float* logits, int vocab, float* out);

}  // namespace inferlab::bench
