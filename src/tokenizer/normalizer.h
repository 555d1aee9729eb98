// Hugging Face normalizers applied to the text between added tokens: Unicode forms, Lowercase, and
// SentencePiece's Prepend / Replace (a space becomes "▁").
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/regex.h"

namespace inferlab::tokenizer_detail {

enum class NormalizerKind { NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace };

struct Normalizer {
  NormalizerKind kind;
  std::string text;              // Prepend: what goes in front; Replace: the replacement
  std::string literal;           // Replace with a String pattern
  std::shared_ptr<Regex> regex;  // Replace with a Regex pattern
  Normalizer(NormalizerKind k) : kind(k) {}  // NOLINT: a plain kind converts
};

std::string apply_normalizer(const Normalizer& normalizer, std::string_view text);

// True when NFC leaves the text as it is (most text: ASCII, CJK), so it can be skipped. Not a test
// for NFD, which decomposes Hangul syllables (algorithmically: no table entry).
bool nfc_inert(std::string_view text);

}  // namespace inferlab::tokenizer_detail
