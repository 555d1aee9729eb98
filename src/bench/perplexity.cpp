#include "inferlab/bench/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <span>

#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/model.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/util/error.h"

namespace inferlab::bench {
namespace {

// The KL base file: magic, ctx, vocab, chunks, then the chunks' tokens (int32, chunks * ctx), then for
// every scored position (chunks * (ctx - 1 - ctx/2)) its vocab float32 log-probabilities. Full
// distributions rather than a top-k: the KL divergence is then exact (a top-k file can only bound it,
// and loosely for a small model whose distributions are flat), and a format against itself is exactly 0.
constexpr char kMagic[8] = {'I', 'L', 'K', 'L', 'D', '0', '0', '1'};

struct BaseHeader {
  int32_t ctx = 0, vocab = 0, chunks = 0;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("perplexity: cannot read --file '{}'", path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// llama.cpp's mean_and_uncertainty: the mean and the standard error of the mean.
std::pair<double, double> mean_and_error(double sum, double sum2, std::size_t count) {
  if (count < 1) return {0, 0};
  const double mean = sum / count;
  const double var = sum2 / count - mean * mean;
  return {mean, var > 0 && count > 10 ? std::sqrt(var / (count - 1)) : 0.0};
}

double covariance(double sum_a, double sum_b, double sum_ab, std::size_t count) {
  if (count < 10) return 0;
  return (sum_ab / count - (sum_a / count) * (sum_b / count)) / (count - 1);
}

// llama.cpp's percentile: linear interpolation between the sorted values.
double percentile(const std::vector<float>& sorted, double fraction) {
  if (sorted.empty()) return 0;
  const double p = fraction * (sorted.size() - 1);
  const std::size_t i = static_cast<std::size_t>(p);
  const double f = p - i;
  return (1 - f) * sorted[i] + f * sorted[std::min(i + 1, sorted.size() - 1)];
}

struct Sums {
  double nll = 0, nll2 = 0, base = 0, base2 = 0, nll_base = 0, kld = 0, kld2 = 0, dp2 = 0;
  std::size_t same_top = 0, count = 0;
  std::vector<float> klds;
};

}  // namespace

void log_probabilities(const float* logits, int vocab, float* out) {
  float max = logits[0];
  for (int i = 1; i < vocab; ++i) max = std::max(max, logits[i]);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = max + std::log(sum);
  for (int i = 0; i < vocab; ++i) out[i] = static_cast<float>(logits[i] - lse);
}

PerplexityResult compute_perplexity(const PerplexityOptions& o) {
  if (o.ctx < 4) fail("perplexity: --ctx {} is too small (at least 4)", o.ctx);
  if (!o.kl_base_out.empty() && !o.kl_base_in.empty())
    fail("perplexity: --kl-divergence-base writes a reference and --kl-divergence reads one; give one of them");
  const std::string text = read_text(o.file);
  LoadOptions load;
  load.threads = o.threads;
  load.weights = o.weights;
  load.output_weights = o.output_weights;
  auto model = Model::load(o.model, load);
  auto tokenizer = Tokenizer::load(o.model);
  const int vocab = model->config().vocab_size;

  PerplexityResult r;
  r.options = o;
  r.weights_used = o.weights;
  if (const std::string output = output_weights_of(load); output != o.weights) r.weights_used += ", output " + output;
  r.vocab = vocab;
  // The tokenizer's special tokens, as llama.cpp's common_tokenize(..., add_special = true): a BOS
  // where the model adds one.
  std::vector<int32_t> tokens = tokenizer->encode(text, true);
  const std::vector<int32_t> empty = tokenizer->encode("", true);
  r.add_bos = !empty.empty();
  const int32_t bos = r.add_bos ? empty.front() : 0;
  r.text_tokens = tokens.size();
  if (tokens.size() < 2 * static_cast<std::size_t>(o.ctx))
    fail("perplexity: '{}' is {} tokens; a context of {} needs at least {} (two chunks)", o.file, tokens.size(), o.ctx,
         2 * o.ctx);
  int chunks = static_cast<int>(tokens.size() / o.ctx);
  if (o.chunks > 0) chunks = std::min(chunks, o.chunks);
  r.chunks = chunks;
  const int first = o.ctx / 2;

  std::ofstream base_out;
  std::ifstream base_in;
  if (!o.kl_base_out.empty()) {
    base_out.open(o.kl_base_out, std::ios::binary);
    if (!base_out) fail("perplexity: cannot write --kl-divergence-base '{}'", o.kl_base_out);
    const BaseHeader h{o.ctx, vocab, chunks};
    base_out.write(kMagic, sizeof kMagic);
    base_out.write(reinterpret_cast<const char*>(&h), sizeof h);
    base_out.write(reinterpret_cast<const char*>(tokens.data()), sizeof(int32_t) * chunks * o.ctx);
  }
  if (!o.kl_base_in.empty()) {
    base_in.open(o.kl_base_in, std::ios::binary);
    if (!base_in) fail("perplexity: cannot read --kl-divergence '{}'", o.kl_base_in);
    char magic[8];
    BaseHeader h;
    if (!base_in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0 ||
        !base_in.read(reinterpret_cast<char*>(&h), sizeof h))
      fail("perplexity: '{}' is not a KL base file (written by inferlab perplexity --kl-divergence-base)", o.kl_base_in);
    if (h.vocab != vocab) fail("perplexity: '{}' has a vocabulary of {}, this model {}", o.kl_base_in, h.vocab, vocab);
    if (h.ctx != o.ctx) fail("perplexity: '{}' was made with --ctx {}, not {}", o.kl_base_in, h.ctx, o.ctx);
    if (h.chunks < chunks) chunks = r.chunks = h.chunks;
    std::vector<int32_t> base_tokens(static_cast<std::size_t>(h.chunks) * o.ctx);
    if (!base_in.read(reinterpret_cast<char*>(base_tokens.data()), sizeof(int32_t) * base_tokens.size()))
      fail("perplexity: '{}' is truncated", o.kl_base_in);
    if (!std::equal(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(chunks) * o.ctx, base_tokens.begin()))
      fail("perplexity: '{}' was made from other tokens (another text or tokenizer)", o.kl_base_in);
  }
  const bool compare = base_in.is_open();

  Sums s;
  std::vector<float> lp(vocab), base(vocab);
  std::vector<int32_t> chunk(o.ctx);
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < chunks; ++c) {
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(c) * o.ctx, o.ctx, chunk.begin());
    if (r.add_bos) chunk[0] = bos;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<float> logits = prompt_logits(*model, chunk);
    r.forward_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int j = first; j < o.ctx - 1; ++j) {
      const float* row = &logits[static_cast<std::size_t>(j) * vocab];
      const int32_t next = chunk[j + 1];
      log_probabilities(row, vocab, lp.data());
      const double nll = -static_cast<double>(lp[next]);
      s.nll += nll;
      s.nll2 += nll * nll;
      ++s.count;
      if (base_out.is_open()) base_out.write(reinterpret_cast<const char*>(lp.data()), sizeof(float) * vocab);
      if (!compare) continue;
      if (!base_in.read(reinterpret_cast<char*>(base.data()), sizeof(float) * vocab))
        fail("perplexity: '{}' is truncated (chunk {})", o.kl_base_in, c + 1);
      const double nll_base = -static_cast<double>(base[next]);
      s.base += nll_base;
      s.base2 += nll_base * nll_base;
      s.nll_base += nll * nll_base;
      double kld = 0;
      int top = 0, top_base = 0;
      for (int i = 0; i < vocab; ++i) {
        kld += std::exp(static_cast<double>(base[i])) * (static_cast<double>(base[i]) - lp[i]);
        if (lp[i] > lp[top]) top = i;
        if (base[i] > base[top_base]) top_base = i;
      }
      s.kld += kld;
      s.kld2 += kld * kld;
      s.klds.push_back(static_cast<float>(kld));
      s.same_top += top == top_base;
      const double dp = std::exp(-nll) - std::exp(-nll_base);
      s.dp2 += dp * dp;
    }
    if (o.on_progress) {
      PerplexityProgress p{c + 1, chunks, std::exp(s.nll / s.count),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
      o.on_progress(p);
    }
  }
  r.loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (base_out.is_open() && !base_out.flush()) fail("perplexity: writing '{}' failed", o.kl_base_out);

  r.scored = s.count;
  const auto [mean_nll, nll_err] = mean_and_error(s.nll, s.nll2, s.count);
  r.nll = mean_nll;
  r.ppl = std::exp(mean_nll);
  r.ppl_err = r.ppl * nll_err;
  r.tokens_per_second = r.forward_seconds > 0 ? static_cast<double>(chunks) * o.ctx / r.forward_seconds : 0;
  if (compare) {
    KlDivergence k;
    const auto [mean_base, base_err] = mean_and_error(s.base, s.base2, s.count);
    k.ppl_base = std::exp(mean_base);
    k.ppl_base_err = k.ppl_base * base_err;
    const double cov = covariance(s.nll, s.base, s.nll_base, s.count);
    k.ln_ratio = mean_nll - mean_base;
    k.ln_ratio_err = std::sqrt(std::max(0.0, nll_err * nll_err + base_err * base_err - 2 * cov));
    k.dppl = r.ppl - k.ppl_base;
    k.dppl_err = std::sqrt(std::max(0.0, r.ppl_err * r.ppl_err + k.ppl_base_err * k.ppl_base_err -
                                             2 * r.ppl * k.ppl_base * cov));
    const auto [kl_mean, kl_err] = mean_and_error(s.kld, s.kld2, s.count);
    k.mean = kl_mean;
    k.mean_err = kl_err;
    std::sort(s.klds.begin(), s.klds.end());
    const std::size_t n = s.klds.size();
    k.median = n % 2 == 0 ? 0.5 * (s.klds[n / 2] + s.klds[n / 2 - 1]) : s.klds[n / 2];
    k.p99 = percentile(s.klds, 0.99);
    k.p999 = percentile(s.klds, 0.999);
    k.max = s.klds.back();
    k.same_top = static_cast<double>(s.same_top) / s.count;
    k.same_top_err = s.count > 1 ? std::sqrt(k.same_top * (1 - k.same_top) / (s.count - 1)) : 0;
    k.rms_dp = std::sqrt(s.dp2 / s.count);
    r.kld = k;
  }
  return r;
}

std::string perplexity_text(const PerplexityResult& r) {
  const PerplexityOptions& o = r.options;
  std::string text = fmt::format(
      "{} (weights {}): {} tokens in '{}', {} chunks of {} (BOS {}), {} positions scored\n", o.model, r.weights_used,
      r.text_tokens, o.file, r.chunks, o.ctx, r.add_bos ? "replaces each chunk's first token" : "not added",
      r.scored);
  text += fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_err);
  text += fmt::format("prompt processing: {:.1f} tokens/s ({:.2f} s of forward passes)\n", r.tokens_per_second,
                      r.forward_seconds);
  if (!o.kl_base_out.empty()) text += fmt::format("saved the reference log-probabilities to {}\n", o.kl_base_out);
  if (r.kld) {
    const KlDivergence& k = *r.kld;
    text += fmt::format("\n====== Perplexity statistics (against {}) ======\n", o.kl_base_in);
    text += fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", r.ppl, r.ppl_err);
    text += fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", k.ppl_base, k.ppl_base_err);
    text += fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", k.ln_ratio, k.ln_ratio_err);
    text += fmt::format("Mean PPL(Q)-PPL(base)         : {:10.6f} ± {:10.6f}\n", k.dppl, k.dppl_err);
    text += "\n====== KL divergence statistics ======\n";
    text += fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}\n", k.mean, k.mean_err);
    text += fmt::format("Maximum KLD: {:10.6f}\n99.9%   KLD: {:10.6f}\n99.0%   KLD: {:10.6f}\nMedian  KLD: {:10.6f}\n", k.max,
                        k.p999, k.p99, k.median);
    text += fmt::format("\nRMS Δp     : {:6.3f} %\nSame top p : {:6.3f} ± {:5.3f} %\n", 100 * k.rms_dp, 100 * k.same_top,
                        100 * k.same_top_err);
  }
  return text;
}

nlohmann::json perplexity_json(const PerplexityResult& r) {
  nlohmann::json doc = {{"model", r.options.model},
                        {"file", r.options.file},
                        {"weights", r.weights_used},
                        {"ctx", r.options.ctx},
                        {"chunks", r.chunks},
                        {"text_tokens", r.text_tokens},
                        {"scored", r.scored},
                        {"add_bos", r.add_bos},
                        {"ppl", r.ppl},
                        {"ppl_err", r.ppl_err},
                        {"mean_nll", r.nll},
                        {"tokens_per_second", r.tokens_per_second},
                        {"forward_seconds", r.forward_seconds},
                        {"loop_seconds", r.loop_seconds}};
  if (r.kld) {
    const KlDivergence& k = *r.kld;
    doc["kl_divergence"] = {{"base", r.options.kl_base_in},   {"ppl_base", k.ppl_base},   {"ppl_base_err", k.ppl_base_err},
                            {"ln_ppl_ratio", k.ln_ratio},     {"ln_ppl_ratio_err", k.ln_ratio_err},
                            {"delta_ppl", k.dppl},            {"delta_ppl_err", k.dppl_err},
                            {"mean", k.mean},                 {"mean_err", k.mean_err},
                            {"median", k.median},             {"p99", k.p99},
                            {"p999", k.p999},                 {"max", k.max},
                            {"same_top", k.same_top},         {"same_top_err", k.same_top_err},
                            {"rms_delta_p", k.rms_dp}};
  }
  return doc;
}

}  // namespace inferlab::bench
