// Added tokens (special or not) are cut out of the raw text before normalization, as Hugging Face
// tokenizers do: leftmost, longest, honouring lstrip / rstrip / single_word. Shared by every model.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::tokenizer_detail {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false;
  // Matched in the normalized text, its content normalized too (Hugging Face's default for
  // non-special tokens). WordPiece honours it; the BPE tokenizers match every added token raw.
  bool normalized = false;
};

struct AddedTokenMatch {
  std::size_t segment_end;  // where the text before the token ends (after lstrip took its spaces)
  int32_t id;
  std::size_t resume;       // where the text after the token starts (after rstrip took its spaces)
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // The first added token at or after `from`; lstrip never reaches back before `from`.
  std::optional<AddedTokenMatch> next(std::string_view text, std::size_t from) const;

  // Calls on_segment(text, at_text_start) for each stretch between added tokens (empty ones too)
  // and on_token(id) for each token, in order.
  template <class OnSegment, class OnToken>
  void split(std::string_view text, OnSegment&& on_segment, OnToken&& on_token) const {
    std::size_t start = 0;
    while (auto match = next(text, start)) {
      on_segment(text.substr(start, match->segment_end - start), start == 0);
      on_token(match->id);
      start = match->resume;
    }
    on_segment(text.substr(start), start == 0);
  }

 private:
  std::vector<AddedToken> tokens_;  // longest first
  std::array<uint8_t, 256> first_byte_{};
};

}  // namespace inferlab::tokenizer_detail
