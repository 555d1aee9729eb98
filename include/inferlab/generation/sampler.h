// Picks the next token from one row of logits: greedy, or temperature / top-k / top-p / min-p
// sampling with a per-request seeded RNG, the repetition penalty (transformers' and vLLM's), OpenAI
// frequency/presence penalties, logit bias and min_tokens, and the log-probabilities OpenAI's
// logprobs / top_logprobs report.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace inferlab {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 or -1: off
  float min_p = 0.0f;        // [0, 1]: drop tokens below min_p * p(most likely)
  float frequency_penalty = 0.0f;  // [-2, 2], times the count of the token in the output so far
  float presence_penalty = 0.0f;   // [-2, 2], once if the token is in the output so far
  // > 0 (1: off). Each token of the prompt or the output so far, once: its logit divided by this
  // when positive, multiplied when not (transformers' RepetitionPenaltyLogitsProcessor, vLLM's
  // repetition_penalty; applied before the frequency and presence penalties, as vLLM does).
  float repetition_penalty = 1.0f;
  // The stop ids (Sampler's stop_ids) are never chosen before this many tokens (vLLM's min_tokens,
  // transformers' MinNewTokensLengthLogitsProcessor).
  int min_tokens = 0;
  std::unordered_map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;  // same seed => same tokens; none: a random one
  bool logprobs = false;         // compute SampledToken::logprob (a pass over the row)
  int top_logprobs = 0;          // how many alternatives to report per token (0..20); implies logprobs
  // Only ids below this are ever chosen or reported (0: the whole row). The server sets the
  // tokenizer's size: models pad the embedding past it (Qwen2: 151936 rows, 151669 tokens).
  int vocab_limit = 0;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;              // (when asked) of `token` under the model's distribution (log-softmax of raw logits)
  std::vector<TokenLogprob> top;     // the top_logprobs most likely tokens, most likely first
};

class Sampler {
 public:
  // prompt: the tokens the repetition penalty counts besides the output; stop_ids: the tokens
  // min_tokens holds back (the request's EOS and stop ids).
  explicit Sampler(SamplingParams params, std::span<const int32_t> prompt = {}, std::span<const int32_t> stop_ids = {});

  // Samples from `logits` (one row, vocab_size wide) and counts the token for the penalties.
  SampledToken sample(std::span<const float> logits);
  // Speculative decoding's check of a proposed token (a draft's point mass): greedy keeps it when
  // it is the argmax; sampling keeps it with probability p(draft) under the same temperature /
  // top-k / top-p / min-p / penalties, and otherwise draws from p with the draft left out — so the
  // emitted token is distributed exactly as sample() would draw it. `accepted` says which.
  SampledToken verify(std::span<const float> logits, int32_t draft, bool& accepted);

  const SamplingParams& params() const { return params_; }

 private:
  std::span<const float> limited(std::span<const float> logits) const;  // vocab_limit applied
  bool plain_greedy() const;  // argmax of the raw row: greedy with no penalty or bias in play
  int32_t greedy_choice(std::span<const float> logits);  // argmax after penalties and bias
  void adjust(std::span<const float> logits);  // scratch_ = logits with penalties and bias
  // scratch_ (adjusted logits) -> sampling weights: temperature, then 0 for every token top-k /
  // top-p / min-p leave out. Returns their sum.
  double weigh();
  // Inverse-CDF draw over scratch_'s weights in id order (so the result does not depend on how
  // candidates were sorted); `total` is their sum.
  int32_t draw(double total);
  SampledToken finish(std::span<const float> logits, int32_t chosen);  // logprobs, counts
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int> output_counts_;  // token -> times generated (penalties)
  std::unordered_set<int32_t> prompt_tokens_;       // kept only for a repetition penalty
  std::vector<int32_t> stop_ids_;                   // kept only for min_tokens
  int generated_ = 0;
  std::vector<float> scratch_;
  std::vector<int32_t> order_;
  std::vector<float> kept_;
};

}  // namespace inferlab
