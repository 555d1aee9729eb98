// Random text of a length, shared by the generated datasets (random, prefix-repetition,
// generated-shared-prefix, random-multi-turn).
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <string>

namespace inferlab::lab {

class TextTokenizer;

// `count` random common English words (about one token each), space-separated.
std::string random_words(int count, std::mt19937_64& rng);
// Random non-special ids decoded to text whose encoding is exactly `length` tokens.
std::string exact_length_text(int length, std::mt19937_64& rng, const TextTokenizer& tokenizer);
// One of the two: exact with a tokenizer, words without.
std::string random_text(int length, std::mt19937_64& rng, const TextTokenizer* tokenizer);
// The prompt's token count when a tokenizer can tell it.
std::optional<int64_t> count_tokens(const std::string& text, const TextTokenizer* tokenizer);

}  // namespace inferlab::lab
