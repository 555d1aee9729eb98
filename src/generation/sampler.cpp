#include "inferlab/generation/sampler.h"

#include "inferlab/generation/greedy_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "inferlab/util/error.h"

namespace inferlab {
namespace {

constexpr float kGreedyBelow = 1e-5f;  // temperatures this small behave as greedy (as vLLM does)
constexpr std::size_t kTopPFirstTry = 2048;  // top-p usually ends inside the top few thousand

float log_sum_exp(std::span<const float> logits, float max) {
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - max));
  return max + static_cast<float>(std::log(sum));
}

// Uniform in [0, 1): from the raw 64-bit output so the same seed gives the same tokens on every
// standard library (std::uniform_real_distribution is not specified bit for bit).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

Sampler::Sampler(SamplingParams params, std::span<const int32_t> prompt, std::span<const int32_t> stop_ids)
    : params_(std::move(params)) {
  if (!(params_.temperature >= 0.0f) || !std::isfinite(params_.temperature))
    fail("temperature must be a finite number >= 0, got {}", params_.temperature);
  if (!(params_.top_p > 0.0f && params_.top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", params_.top_p);
  if (params_.top_k < -1) fail("top_k must be -1, 0 (off) or a positive count, got {}", params_.top_k);
  if (!(params_.min_p >= 0.0f && params_.min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", params_.min_p);
  if (!(params_.repetition_penalty > 0.0f) || !std::isfinite(params_.repetition_penalty))
    fail("repetition_penalty must be a finite number > 0, got {}", params_.repetition_penalty);
  if (params_.min_tokens < 0) fail("min_tokens must be >= 0, got {}", params_.min_tokens);
  if (params_.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
  if (params_.min_tokens > 0) stop_ids_.assign(stop_ids.begin(), stop_ids.end());
  if (params_.top_logprobs < 0) fail("top_logprobs must be >= 0, got {}", params_.top_logprobs);
  if (params_.vocab_limit < 0) fail("vocab_limit must be >= 0, got {}", params_.vocab_limit);
  uint64_t seed = params_.seed ? *params_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  rng_.seed(seed);
}

std::span<const float> Sampler::limited(std::span<const float> logits) const {
  if (logits.empty()) fail("sampler: empty logits row");
  if (params_.vocab_limit > 0 && static_cast<std::size_t>(params_.vocab_limit) < logits.size())
    return logits.first(static_cast<std::size_t>(params_.vocab_limit));
  return logits;
}

bool Sampler::plain_greedy() const {
  const bool penalised = !output_counts_.empty() && (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f);
  const bool repeated = !prompt_tokens_.empty() || (params_.repetition_penalty != 1.0f && !output_counts_.empty());
  const bool held_back = generated_ < params_.min_tokens && !stop_ids_.empty();
  return params_.temperature < kGreedyBelow && !penalised && !repeated && !held_back && params_.logit_bias.empty();
}

void Sampler::adjust(std::span<const float> logits) {
  const std::size_t vocab = logits.size();
  // Penalties and bias change a copy; logprobs are reported from the model's own distribution.
  scratch_.assign(logits.begin(), logits.end());
  if (params_.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t token) {
      if (token < 0 || static_cast<std::size_t>(token) >= vocab) return;
      float& x = scratch_[token];
      x = x > 0.0f ? x / params_.repetition_penalty : x * params_.repetition_penalty;
    };
    for (int32_t token : prompt_tokens_) penalise(token);
    for (const auto& [token, count] : output_counts_)
      if (!prompt_tokens_.contains(token)) penalise(token);  // once per token, prompt or output
  }
  for (const auto& [token, count] : output_counts_) {
    if (token < 0 || static_cast<std::size_t>(token) >= vocab) continue;
    scratch_[token] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
  for (const auto& [token, bias] : params_.logit_bias)
    if (token >= 0 && static_cast<std::size_t>(token) < vocab) scratch_[token] += bias;
  if (generated_ < params_.min_tokens)
    for (int32_t token : stop_ids_)
      if (token >= 0 && static_cast<std::size_t>(token) < vocab) scratch_[token] = -std::numeric_limits<float>::infinity();
}

int32_t Sampler::greedy_choice(std::span<const float> logits) {
  // argmax gives std::max_element's answer (the first maximum) without its serial chain, which
  // over 152k logits took ~10 % of a batch-8 decode step (docs/speed.md).
  if (plain_greedy()) return argmax(logits);  // no copy of the row
  adjust(logits);
  return argmax(scratch_);
}

double Sampler::weigh() {
  const std::size_t vocab = scratch_.size();
  const float inv_t = 1.0f / params_.temperature;
  float max = -std::numeric_limits<float>::infinity();
  for (float& x : scratch_) {
    x *= inv_t;
    max = std::max(max, x);
  }
  // Unnormalised probabilities; the most likely token has 1, so min-p's floor is min_p itself.
  for (float& x : scratch_) x = std::exp(x - max);
  const float min_p_floor = params_.min_p;

  const bool top_k_on = params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < vocab;
  const bool top_p_on = params_.top_p < 1.0f;
  if (top_k_on || top_p_on) {
    auto by_probability = [&](int32_t a, int32_t b) {
      return scratch_[a] > scratch_[b] || (scratch_[a] == scratch_[b] && a < b);
    };
    order_.resize(vocab);
    std::iota(order_.begin(), order_.end(), 0);
    std::size_t kept = vocab;
    if (top_k_on) {
      kept = static_cast<std::size_t>(params_.top_k);
      std::nth_element(order_.begin(), order_.begin() + kept - 1, order_.end(), by_probability);
      order_.resize(kept);
    }
    if (top_p_on) {
      double total = 0.0;
      for (int32_t id : order_) total += scratch_[id];
      const double needed = params_.top_p * total;
      auto keep_prefix = [&](std::size_t sorted) -> bool {
        double running = 0.0;
        for (std::size_t i = 0; i < sorted; ++i) {
          running += scratch_[order_[i]];
          if (running >= needed) {
            kept = i + 1;
            return true;
          }
        }
        return false;
      };
      bool done = false;
      if (order_.size() > kTopPFirstTry) {
        std::partial_sort(order_.begin(), order_.begin() + kTopPFirstTry, order_.end(), by_probability);
        done = keep_prefix(kTopPFirstTry);
      }
      if (!done) {
        std::sort(order_.begin(), order_.end(), by_probability);
        if (!keep_prefix(order_.size())) kept = order_.size();
      }
      order_.resize(kept);
    }
    // Everything outside the kept set weighs 0.
    kept_.clear();
    for (int32_t id : order_) kept_.push_back(scratch_[id]);
    std::fill(scratch_.begin(), scratch_.end(), 0.0f);
    for (std::size_t i = 0; i < order_.size(); ++i) scratch_[order_[i]] = kept_[i];
  }
  double total = 0.0;
  for (float& x : scratch_) {
    if (x < min_p_floor) x = 0.0f;
    total += x;
  }
  return total;
}

int32_t Sampler::draw(double total) {
  const double target = uniform01(rng_) * total;
  double running = 0.0;
  int32_t last_kept = -1;
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    if (scratch_[i] <= 0.0f) continue;
    last_kept = static_cast<int32_t>(i);
    running += scratch_[i];
    if (running > target) return last_kept;
  }
  if (last_kept < 0) fail("sampler: no token has a non-zero probability");
  return last_kept;  // rounding at the very end of the scan
}

SampledToken Sampler::sample(std::span<const float> logits) {
  logits = limited(logits);
  if (params_.temperature < kGreedyBelow) return finish(logits, greedy_choice(logits));
  adjust(logits);
  return finish(logits, draw(weigh()));
}

SampledToken Sampler::verify(std::span<const float> logits, int32_t draft, bool& accepted) {
  logits = limited(logits);
  if (params_.temperature < kGreedyBelow) {
    const int32_t chosen = greedy_choice(logits);
    accepted = chosen == draft;
    return finish(logits, chosen);
  }
  adjust(logits);
  const double total = weigh();
  const bool in_vocab = draft >= 0 && static_cast<std::size_t>(draft) < scratch_.size();
  const double weight = in_vocab ? scratch_[draft] : 0.0;
  if (weight > 0.0 && uniform01(rng_) * total < weight) {
    accepted = true;
    return finish(logits, draft);
  }
  // Refused: the rest of p, renormalised (the residual max(0, p - q) of a point-mass draft q).
  accepted = false;
  if (in_vocab) scratch_[draft] = 0.0f;
  return finish(logits, draw(total - weight));
}

SampledToken Sampler::finish(std::span<const float> logits, int32_t chosen) {
  const std::size_t vocab = logits.size();
  SampledToken result;
  result.token = chosen;
  ++output_counts_[chosen];
  ++generated_;
  if (!params_.logprobs && params_.top_logprobs == 0) return result;
  const float raw_max = *std::max_element(logits.begin(), logits.end());
  const float lse = log_sum_exp(logits, raw_max);
  result.logprob = logits[chosen] - lse;
  if (params_.top_logprobs > 0) {
    const std::size_t count = std::min<std::size_t>(params_.top_logprobs, vocab);
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    result.top.reserve(count);
    for (std::size_t i = 0; i < count; ++i) result.top.push_back({ids[i], logits[ids[i]] - lse});
  }
  return result;
}

}  // namespace inferlab
