#include "inferlab/generation/sampler.h"

#include "inferlab/generation/greedy_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

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

constexpr std::size_t kDryBreakerMaxBytes = 40;  // llama.cpp's MAX_CHAR_LEN
constexpr std::size_t kDryBreakerMaxTail = 20;   // llama.cpp's MAX_SEQ_LEN
constexpr uint64_t kXtcStream = 0x9e3779b97f4a7c15ull;  // XTC's generator: the seed xor this

}  // namespace

std::vector<DryBreaker> dry_breaker_sequences(const std::vector<std::string>& breakers, int vocab_size,
                                              const std::function<std::string(int32_t)>& token_text,
                                              const std::function<std::vector<int32_t>(const std::string&)>& tokenize) {
  std::vector<std::string> strings;
  for (const std::string& breaker : breakers)
    if (!breaker.empty()) strings.push_back(breaker.substr(0, kDryBreakerMaxBytes));
  std::vector<DryBreaker> out;
  if (strings.empty()) return out;
  // A tail's tokens depend only on the string and where the token's text left off: tokenize once.
  std::map<std::string, std::vector<int32_t>> tails;
  for (int32_t id = 0; id < vocab_size; ++id) {
    const std::string word = token_text(id);
    std::set<std::vector<int32_t>> seen;  // this head's tails (llama.cpp adds each once)
    for (const std::string& str : strings) {
      if (word.find(str) != std::string::npos) {
        out.push_back({id, {}});
        continue;
      }
      // The token's text ends with a proper prefix of the breaker: the rest follows as a tail.
      for (std::size_t pos = word.find(str[0]); pos != std::string::npos; pos = word.find(str[0], pos + 1)) {
        std::size_t matched = 1;
        while (matched < str.size() && pos + matched < word.size() && word[pos + matched] == str[matched]) ++matched;
        if (pos + matched < word.size()) continue;  // a mismatch inside the word
        const std::string rest = str.substr(matched);
        auto it = tails.find(rest);
        if (it == tails.end()) {
          std::vector<int32_t> ids = tokenize(rest);
          if (ids.size() > kDryBreakerMaxTail) ids.resize(kDryBreakerMaxTail);
          it = tails.emplace(rest, std::move(ids)).first;
        }
        if (seen.insert(it->second).second) out.push_back({id, it->second});
      }
    }
  }
  return out;
}

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
  if (!(params_.typical_p > 0.0f && params_.typical_p <= 1.0f)) fail("typical_p must be in (0, 1], got {}", params_.typical_p);
  if (!(params_.xtc_probability >= 0.0f && params_.xtc_probability <= 1.0f))
    fail("xtc_probability must be in [0, 1], got {}", params_.xtc_probability);
  if (!(params_.xtc_threshold >= 0.0f && params_.xtc_threshold <= 1.0f))
    fail("xtc_threshold must be in [0, 1], got {}", params_.xtc_threshold);
  if (!(params_.dry_multiplier >= 0.0f) || !std::isfinite(params_.dry_multiplier))
    fail("dry_multiplier must be a finite number >= 0, got {}", params_.dry_multiplier);
  if (!(params_.dry_base >= 0.0f) || !std::isfinite(params_.dry_base))
    fail("dry_base must be a finite number >= 0 (below 1: off), got {}", params_.dry_base);
  if (params_.dry_allowed_length < 0) fail("dry_allowed_length must be >= 0, got {}", params_.dry_allowed_length);
  if (params_.dry_penalty_last_n < 0) fail("dry_penalty_last_n must be >= 0, got {}", params_.dry_penalty_last_n);
  if (dry_on()) {
    const std::size_t last_n = static_cast<std::size_t>(params_.dry_penalty_last_n);
    const std::size_t from = prompt.size() > last_n ? prompt.size() - last_n : 0;
    dry_history_.assign(prompt.begin() + static_cast<std::ptrdiff_t>(from), prompt.end());
    for (const DryBreaker& breaker : params_.dry_breakers) dry_breakers_.emplace(breaker.head, breaker.tail);
  }
  if (params_.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
  if (params_.min_tokens > 0) stop_ids_.assign(stop_ids.begin(), stop_ids.end());
  if (params_.top_logprobs < 0) fail("top_logprobs must be >= 0, got {}", params_.top_logprobs);
  if (params_.vocab_limit < 0) fail("vocab_limit must be >= 0, got {}", params_.vocab_limit);
  uint64_t seed = params_.seed ? *params_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  rng_.seed(seed);
  xtc_rng_.seed(seed ^ kXtcStream);
}

bool Sampler::dry_on() const {
  return params_.dry_multiplier != 0.0f && params_.dry_base >= 1.0f && params_.dry_penalty_last_n > 0;
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
  return params_.temperature < kGreedyBelow && !penalised && !repeated && !held_back && params_.logit_bias.empty() &&
         !dry_on();
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
  if (dry_on()) apply_dry();
  for (const auto& [token, bias] : params_.logit_bias)
    if (token >= 0 && static_cast<std::size_t>(token) < vocab) scratch_[token] += bias;
  if (generated_ < params_.min_tokens)
    for (int32_t token : stop_ids_)
      if (token >= 0 && static_cast<std::size_t>(token) < vocab) scratch_[token] = -std::numeric_limits<float>::infinity();
}

// llama.cpp's llama_sampler_dry_apply (from koboldcpp): over the last n tokens, how long a repeat of
// the window's end each position ends; the token after such a position would lengthen that repeat.
void Sampler::apply_dry() {
  const int allowed = params_.dry_allowed_length;
  const int n = static_cast<int>(std::min<std::size_t>(dry_history_.size(), static_cast<std::size_t>(params_.dry_penalty_last_n)));
  if (n <= allowed) return;
  const int32_t* window = dry_history_.data() + (dry_history_.size() - static_cast<std::size_t>(n));
  auto from_end = [&](int i) { return window[n - 1 - i]; };  // 0: the last token

  // 1. The latest breaker (the longest one ending there) caps how far back a repeat may reach.
  int rep_limit = n;
  for (int i = 0; i < n; ++i) {
    auto [first, last] = dry_breakers_.equal_range(from_end(i));
    if (first == last) continue;
    int longest = -1;
    for (auto it = first; it != last; ++it) {
      const int tail = static_cast<int>(it->second.size());
      if (tail <= longest || tail > i) continue;
      bool match = true;
      for (int k = 0; k < tail && match; ++k) match = it->second[k] == from_end(i - k - 1);
      if (match) longest = tail;
    }
    if (longest >= 0) {
      rep_limit = i - longest;
      break;
    }
  }
  if (rep_limit < allowed) return;

  // 2. Z-function of the reversed window: z_[k] = how many tokens ending k before the end repeat
  // the window's end. dry_repeat_[j]: that length (capped) for the repeat ending at window[j].
  z_.assign(static_cast<std::size_t>(n), 0);
  for (int k = 1, left = 0, right = 0; k < n; ++k) {
    int z = k < right ? std::min(right - k, z_[k - left]) : 0;
    while (k + z < n && from_end(z) == from_end(k + z)) ++z;
    z_[k] = z;
    if (k + z > right) left = k, right = k + z;
  }
  dry_repeat_.assign(static_cast<std::size_t>(n), 0);
  for (int k = 1; k < n; ++k) dry_repeat_[n - 1 - k] = std::min(z_[k], rep_limit);

  // 3. Each token that would extend a repeat of at least the allowed length: its longest one.
  std::unordered_map<int32_t, int> longest_repeat;
  for (int j = 0; j + 1 < n; ++j) {
    if (dry_repeat_[j] < allowed) continue;
    int& best = longest_repeat.try_emplace(window[j + 1], dry_repeat_[j]).first->second;
    best = std::max(best, dry_repeat_[j]);
  }

  // 4. The penalty, its exponent capped where base^exponent would overflow a float.
  constexpr float kFloatMaxLog = 88.7228391f;
  int max_exponent = 0;
  if (params_.dry_base > 1.000001f) max_exponent = static_cast<int>(kFloatMaxLog / std::log(params_.dry_base));
  for (const auto& [token, repeat] : longest_repeat) {
    if (token < 0 || static_cast<std::size_t>(token) >= scratch_.size()) continue;
    auto [first, last] = dry_breakers_.equal_range(token);
    if (std::any_of(first, last, [](const auto& breaker) { return breaker.second.empty(); })) continue;
    int exponent = repeat - allowed;
    if (max_exponent > 0 && exponent > max_exponent) exponent = max_exponent;
    const float penalty = static_cast<float>(params_.dry_multiplier * std::pow(static_cast<double>(params_.dry_base), exponent));
    scratch_[token] -= penalty;
  }
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
  // Unnormalised probabilities; the most likely token has 1.
  for (float& x : scratch_) x = std::exp(x - max);

  const bool top_k_on = params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < vocab;
  const bool typical_on = params_.typical_p < 1.0f;
  const bool top_p_on = params_.top_p < 1.0f;
  float kept_max = 1.0f;  // the most likely candidate's weight: 1 unless typical-p dropped it
  if (top_k_on || typical_on || top_p_on) {
    auto by_probability = [&](int32_t a, int32_t b) {
      return scratch_[a] > scratch_[b] || (scratch_[a] == scratch_[b] && a < b);
    };
    order_.resize(vocab);
    std::iota(order_.begin(), order_.end(), 0);
    if (top_k_on) {
      const std::size_t kept = static_cast<std::size_t>(params_.top_k);
      std::nth_element(order_.begin(), order_.begin() + kept - 1, order_.end(), by_probability);
      order_.resize(kept);
    }
    if (typical_on) keep_typical();
    if (top_p_on) {
      std::size_t kept = order_.size();
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
    if (typical_on) kept_max = *std::max_element(kept_.begin(), kept_.end());
  }
  // min-p is relative to the most likely token still in (llama.cpp's and transformers' rule).
  const float min_p_floor = params_.min_p * kept_max;
  double total = 0.0;
  for (float& x : scratch_) {
    if (x < min_p_floor) x = 0.0f;
    total += x;
  }
  if (params_.xtc_probability > 0.0f && params_.xtc_threshold <= 0.5f) {
    exclude_top_choices(total);
    total = 0.0;
    for (float x : scratch_) total += x;
  }
  return total;
}

// transformers' TypicalLogitsWarper over the candidates in order_ (llama.cpp's typical sampler is
// the same but for ties): by |-log p - H| ascending, the shortest prefix whose mass reaches
// typical_p, and any candidate tied with its last one.
void Sampler::keep_typical() {
  const std::size_t count = order_.size();
  double sum = 0.0;
  for (int32_t id : order_) sum += scratch_[id];
  const double log_sum = std::log(sum);
  double entropy = 0.0;
  for (int32_t id : order_) {
    const double p = scratch_[id] / sum;
    if (p > 0.0) entropy -= p * (std::log(static_cast<double>(scratch_[id])) - log_sum);
  }
  std::vector<std::pair<double, int32_t>> shifted(count);  // (|-log p - H|, id)
  for (std::size_t i = 0; i < count; ++i) {
    const int32_t id = order_[i];
    const double surprise = scratch_[id] > 0.0f ? -(std::log(static_cast<double>(scratch_[id])) - log_sum)
                                                : std::numeric_limits<double>::infinity();
    shifted[i] = {std::abs(surprise - entropy), id};
  }
  std::sort(shifted.begin(), shifted.end());
  std::size_t last = count - 1;
  double mass = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    mass += scratch_[shifted[i].second] / sum;
    if (mass >= params_.typical_p) {
      last = i;
      break;
    }
  }
  while (last + 1 < count && shifted[last + 1].first == shifted[last].first) ++last;
  for (std::size_t i = 0; i <= last; ++i) order_[i] = shifted[i].second;
  order_.resize(last + 1);
}

// llama.cpp's XTC: a coin per token (drawn whenever two or more candidates remain); on a hit, every
// candidate at or above the threshold except the least likely of them goes.
void Sampler::exclude_top_choices(double total) {
  std::size_t candidates = 0;
  for (float x : scratch_) candidates += x > 0.0f;
  if (candidates < 2) return;
  if (uniform01(xtc_rng_) > params_.xtc_probability) return;
  std::vector<int32_t> above;
  for (std::size_t i = 0; i < scratch_.size(); ++i)
    if (scratch_[i] > 0.0f && scratch_[i] / total >= params_.xtc_threshold) above.push_back(static_cast<int32_t>(i));
  if (above.size() < 2) return;
  std::sort(above.begin(), above.end(), [&](int32_t a, int32_t b) {
    return scratch_[a] > scratch_[b] || (scratch_[a] == scratch_[b] && a < b);
  });
  above.pop_back();  // the least likely of them stays
  for (int32_t id : above) scratch_[id] = 0.0f;
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
  if (forced_next_ < params_.forced_tokens.size()) {
    const int32_t forced = params_.forced_tokens[forced_next_++];
    if (forced >= 0 && static_cast<std::size_t>(forced) < logits.size() && logits[forced] != -std::numeric_limits<float>::infinity())
      return finish(logits, forced);
    forced_next_ = params_.forced_tokens.size();  // refused here: the script is over
  }
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

std::vector<double> Sampler::distribution(std::span<const float> logits) {
  logits = limited(logits);
  if (params_.temperature < kGreedyBelow) fail("sampler: distribution() needs a sampling temperature");
  adjust(logits);
  const double total = weigh();
  std::vector<double> probabilities(scratch_.size());
  for (std::size_t i = 0; i < scratch_.size(); ++i) probabilities[i] = scratch_[i] / total;
  return probabilities;
}

std::vector<float> Sampler::adjusted_logits(std::span<const float> logits) {
  adjust(limited(logits));
  return scratch_;
}

SampledToken Sampler::finish(std::span<const float> logits, int32_t chosen) {
  const std::size_t vocab = logits.size();
  SampledToken result;
  result.token = chosen;
  ++output_counts_[chosen];
  ++generated_;
  if (dry_on()) {
    dry_history_.push_back(chosen);
    // Only the last dry_penalty_last_n are read; drop the rest now and then, not every token.
    const std::size_t last_n = static_cast<std::size_t>(params_.dry_penalty_last_n);
    if (dry_history_.size() > 2 * last_n + 256)
      dry_history_.erase(dry_history_.begin(), dry_history_.end() - static_cast<std::ptrdiff_t>(last_n));
  }
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
