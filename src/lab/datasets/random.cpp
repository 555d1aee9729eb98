// --dataset random: prompts of exactly --input-len tokens (with a tokenizer) or of as many common
// English words, each asking for --output-len tokens; with --random-range-ratio r, each request's
// lengths drawn uniformly from [floor(L(1-r)), ceil(L(1+r))] as vLLM's random dataset does.
#include <algorithm>
#include <cmath>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"
#include "lab/datasets/random_text.h"

namespace inferlab::lab {

namespace {

// Common words that are one token each in GPT-2 and Qwen vocabularies (with their leading space).
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "are", "as", "with",
    "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but",
    "not", "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an",
    "each", "which", "she", "do", "how", "their", "if", "will", "up", "other", "about", "out",
    "many", "then", "them", "these", "so", "some", "her", "would", "make", "like", "him", "into",
    "time", "has", "look", "two", "more", "write", "go", "see", "number", "no", "way", "could",
    "people", "my", "than", "first", "water", "been", "call", "who", "its", "now", "find", "long",
    "down", "day", "did", "get", "come", "made", "may", "part", "over", "new", "sound", "take",
    "only", "little", "work", "know", "place", "year", "live", "me", "back", "give", "most", "very"};

}  // namespace

std::string random_words(int count, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, std::size(kWords) - 1);
  std::string text;
  for (int i = 0; i < count; ++i) {
    if (i) text += ' ';
    text += kWords[pick(rng)];
  }
  return text;
}

// Random ids decoded to text whose encoding is exactly `length` tokens (decode-encode is not the
// identity for arbitrary ids, so re-encode, trim or top up, and repeat).
std::string exact_length_text(int length, std::mt19937_64& rng, const TextTokenizer& tokenizer) {
  std::uniform_int_distribution<int32_t> pick(0, tokenizer.vocab_size() - 1);
  auto random_id = [&] {
    for (;;) {
      int32_t id = pick(rng);
      if (!tokenizer.is_special(id)) return id;
    }
  };
  std::vector<int32_t> ids;
  for (int attempt = 0; attempt < 50; ++attempt) {
    while (static_cast<int>(ids.size()) < length) ids.push_back(random_id());
    ids.resize(length);
    std::string text = tokenizer.decode(ids);
    std::vector<int32_t> again = tokenizer.encode(text);
    if (static_cast<int>(again.size()) == length) return text;
    ids = std::move(again);
  }
  fail("could not make a random prompt of exactly {} tokens with this tokenizer", length);
}

std::string random_text(int length, std::mt19937_64& rng, const TextTokenizer* tokenizer) {
  return tokenizer ? exact_length_text(length, rng, *tokenizer) : random_words(length, rng);
}

std::optional<int64_t> count_tokens(const std::string& text, const TextTokenizer* tokenizer) {
  if (!tokenizer) return std::nullopt;
  return static_cast<int64_t>(tokenizer->encode(text).size());
}

std::vector<BenchPrompt> random_prompts(int count, int input_len, int output_len, uint64_t seed,
                                        const TextTokenizer* tokenizer, double range_ratio) {
  if (input_len <= 0) fail("--input-len must be positive, got {}", input_len);
  if (output_len <= 0) fail("--output-len must be positive, got {}", output_len);
  if (!(range_ratio >= 0 && range_ratio < 1)) fail("--random-range-ratio must be in [0, 1), got {}", range_ratio);
  std::mt19937_64 rng(seed);
  // The lengths come from a generator of their own, so r = 0 gives the same texts as before.
  std::mt19937_64 length_rng(seed ^ 0x5DEECE66Dull);
  auto draw = [&](int mean, int at_least) {
    if (range_ratio == 0) return mean;
    const int low = std::max(at_least, static_cast<int>(std::floor(mean * (1 - range_ratio))));
    const int high = std::max(low, static_cast<int>(std::ceil(mean * (1 + range_ratio))));
    return std::uniform_int_distribution<int>(low, high)(length_rng);
  };
  std::vector<BenchPrompt> prompts(count);
  for (auto& p : prompts) {
    const int length = draw(input_len, 1);
    p.output_len = draw(output_len, 1);
    p.text = random_text(length, rng, tokenizer);
    if (tokenizer) p.input_tokens = length;
  }
  return prompts;
}

std::vector<BenchPrompt> random_dataset(const DatasetRequest& r) {
  return random_prompts(r.count, r.input_len > 0 ? r.input_len : 128, r.output_len > 0 ? r.output_len : 64, r.seed,
                        r.tokenizer, r.range_ratio);
}

}  // namespace inferlab::lab
