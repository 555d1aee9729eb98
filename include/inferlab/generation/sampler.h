// Picks the next token from one row of logits: greedy, or temperature / top-k / typical-p / top-p /
// min-p / XTC sampling with a per-request seeded RNG, the repetition penalty (transformers' and
// vLLM's), OpenAI frequency/presence penalties, llama.cpp's DRY penalty, logit bias and min_tokens,
// and the log-probabilities OpenAI's logprobs / top_logprobs report.
//
// Order, for each row: repetition penalty, frequency/presence penalties, DRY, logit bias,
// min_tokens; then (sampling only) temperature, top-k, typical-p, top-p, min-p, XTC, the draw.
// The filters keep llama.cpp's default chain order among themselves (top-k, typical, top-p, min-p,
// XTC); temperature comes first, as in transformers and vLLM (llama.cpp applies it last, so with a
// temperature other than 1 typical-p / top-p / min-p / XTC see a sharper or flatter distribution here).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace inferlab {

// A DRY sequence breaker as token ids: `head` followed by `tail` (usually empty: a one-token
// breaker). llama.cpp's processed form of the breaker strings (dry_breaker_sequences below).
struct DryBreaker {
  int32_t head = 0;
  std::vector<int32_t> tail;
  bool operator==(const DryBreaker&) const = default;
};

// llama.cpp's get_overlapping_token_sequences, for every breaker string (empty ones skipped, each cut
// to 40 bytes): every token whose text contains the string is a one-token breaker; a token whose text
// ends with a proper prefix of it is a head, with the rest of the string tokenized (at most 20 ids) as
// its tail. token_text(id): the token's bytes, special tokens as their text; tokenize: without special
// tokens added. Callbacks keep the sampler free of the tokenizer library.
std::vector<DryBreaker> dry_breaker_sequences(const std::vector<std::string>& breakers, int vocab_size,
                                              const std::function<std::string(int32_t)>& token_text,
                                              const std::function<std::vector<int32_t>(const std::string&)>& tokenize);

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
  // (0, 1], 1: off. Locally typical sampling (transformers' TypicalLogitsWarper, llama.cpp's
  // typical_p): keep the tokens whose -log p is closest to the entropy until their mass reaches
  // typical_p (ties with the last one kept, as transformers does).
  float typical_p = 1.0f;
  // XTC, "exclude top choices" (llama.cpp's xtc_probability / xtc_threshold): with this chance per
  // token, every candidate whose probability is >= the threshold except the least likely of them is
  // removed, when at least two reach it. Off: probability 0 or threshold > 0.5 (llama.cpp's rule).
  float xtc_probability = 0.0f;  // [0, 1]
  float xtc_threshold = 0.1f;    // [0, 1]
  // DRY, "don't repeat yourself" (llama.cpp's dry_*): the token that would extend a sequence already
  // seen in the last dry_penalty_last_n tokens (prompt and output) by a repeat longer than
  // dry_allowed_length loses multiplier * base^(repeat - allowed_length) from its logit; sequence
  // breakers end the repeat looked at. Off: multiplier 0, base < 1 or last_n 0.
  float dry_multiplier = 0.0f;
  float dry_base = 1.75f;
  int dry_allowed_length = 2;
  int dry_penalty_last_n = 64;  // > 0 (0: off)
  std::vector<DryBreaker> dry_breakers;  // dry_breaker_sequences of the breaker strings
  std::unordered_map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;  // same seed => same tokens; none: a random one
  bool logprobs = false;         // compute SampledToken::logprob (a pass over the row)
  int top_logprobs = 0;          // how many alternatives to report per token (0..20); implies logprobs
  // Only ids below this are ever chosen or reported (0: the whole row). The server sets the
  // tokenizer's size: models pad the embedding past it (Qwen2: 151936 rows, 151669 tokens).
  int vocab_limit = 0;
  // A test hook (inferlab serve --test-hooks): these tokens are chosen in order, each while it is
  // allowed (its logit not -inf after a grammar's mask); the first one that is not ends the script
  // and sampling goes on as asked. It drives a model with random weights down a chosen path, so
  // the server's parsing of that path can be tested.
  std::vector<int32_t> forced_tokens;
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

  // What sample() would draw from for this row now, without drawing or counting a token: each
  // id's probability (0: left out by a filter). It tosses XTC's coin as sample() would. For tests
  // against reference implementations; the temperature must be above greedy's.
  std::vector<double> distribution(std::span<const float> logits);
  // The row after the penalties, DRY, bias and min_tokens (what temperature and the filters see).
  std::vector<float> adjusted_logits(std::span<const float> logits);

 private:
  std::span<const float> limited(std::span<const float> logits) const;  // vocab_limit applied
  bool plain_greedy() const;  // argmax of the raw row: greedy with no penalty or bias in play
  int32_t greedy_choice(std::span<const float> logits);  // argmax after penalties and bias
  void adjust(std::span<const float> logits);  // scratch_ = logits with penalties and bias
  void apply_dry();  // llama.cpp's DRY penalty on scratch_
  bool dry_on() const;
  // scratch_ (adjusted logits) -> sampling weights: temperature, then 0 for every token top-k /
  // typical-p / top-p / min-p / XTC leave out. Returns their sum.
  double weigh();
  void keep_typical();  // typical-p over order_ (the candidates), in place
  void exclude_top_choices(double total);  // XTC over scratch_'s weights
  // Inverse-CDF draw over scratch_'s weights in id order (so the result does not depend on how
  // candidates were sorted); `total` is their sum.
  int32_t draw(double total);
  SampledToken finish(std::span<const float> logits, int32_t chosen);  // logprobs, counts
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::mt19937_64 xtc_rng_;  // XTC's coin, apart from the draw's stream (as llama.cpp keeps it)
  std::vector<int32_t> dry_history_;  // the prompt and output so far (kept only for DRY)
  std::unordered_multimap<int32_t, std::vector<int32_t>> dry_breakers_;  // head -> tails
  std::unordered_map<int32_t, int> output_counts_;  // token -> times generated (penalties)
  std::unordered_set<int32_t> prompt_tokens_;       // kept only for a repetition penalty
  std::vector<int32_t> stop_ids_;                   // kept only for min_tokens
  int generated_ = 0;
  std::size_t forced_next_ = 0;  // the next of params_.forced_tokens
  std::vector<float> scratch_;
  std::vector<int32_t> order_;
  std::vector<float> kept_;
  std::vector<int> dry_repeat_;      // DRY scratch: repeat length ending at each window position
  std::vector<int> z_;               // DRY scratch: Z-function of the reversed window
};

}  // namespace inferlab
