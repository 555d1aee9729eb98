#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cctype>

namespace inferlab::tokenizer_detail {

namespace {

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_byte(char c) {
  auto b = static_cast<unsigned char>(c);
  return b >= 0x80 || std::isalnum(b) || c == '_';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  // Longest first, so matching picks the longest added token at a position.
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (const AddedToken& token : tokens_) first_byte_[static_cast<unsigned char>(token.content[0])] = 1;
}

std::optional<AddedTokenMatch> AddedTokenMatcher::next(std::string_view text, std::size_t from) const {
  for (std::size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    for (const AddedToken& token : tokens_) {
      if (text.compare(i, token.content.size(), token.content) != 0) continue;
      std::size_t end = i + token.content.size();
      if (token.single_word && ((i > 0 && is_word_byte(text[i - 1])) || (end < text.size() && is_word_byte(text[end]))))
        continue;
      AddedTokenMatch match{i, token.id, end};
      if (token.lstrip)
        while (match.segment_end > from && is_space_byte(text[match.segment_end - 1])) --match.segment_end;
      if (token.rstrip)
        while (match.resume < text.size() && is_space_byte(text[match.resume])) ++match.resume;
      return match;
    }
  }
  return std::nullopt;
}

}  // namespace inferlab::tokenizer_detail
