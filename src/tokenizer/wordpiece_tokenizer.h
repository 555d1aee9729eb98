// WordPiece (the BERT family) as Hugging Face tokenizers runs it: added tokens cut out of the raw
// text, BertNormalizer, BertPreTokenizer, greedy longest-match-first with a continuation prefix
// ("##"), [CLS]/[SEP] from the post-processor, and the WordPiece decoder. Built by loaders.cpp from
// a tokenizer.json with model.type "WordPiece", or from a BERT folder's vocab.txt.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inferlab/tokenizer/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_tokenizer.h"  // PostProcessor

namespace inferlab::tokenizer_detail {

// tokenizer.json's BertNormalizer; strip_accents null there means "as lowercase".
struct BertNormalizerOptions {
  bool clean_text = true;            // drop NUL, U+FFFD and control/format chars; whitespace -> ' '
  bool handle_chinese_chars = true;  // a space each side of a CJK ideograph
  bool strip_accents = true;         // NFD, then drop nonspacing marks (Mn)
  bool lowercase = true;
};

// BertNormalizer on text (invalid UTF-8 is first made valid, each bad sequence a U+FFFD).
std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options);

// BertPreTokenizer: words split on whitespace (removed) and around each punctuation character
// (kept as a word of its own). Appends views into text.
void bert_pre_tokenize(std::string_view text, std::vector<std::string_view>& words);

// Hugging Face's punctuation for BERT: ASCII 33-47, 58-64, 91-96, 123-126, and Unicode P*.
bool is_bert_punctuation(char32_t cp);

// The WordPiece decoder's cleanup of one decoded token (" ." -> ".", " n't" -> "n't", ...).
void wordpiece_cleanup(std::string& token);

struct WordPieceSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  std::size_t max_input_chars_per_word = 100;
  std::vector<AddedToken> added_tokens;
  std::optional<BertNormalizerOptions> normalizer;  // none: the text as it is
  bool bert_pre_tokenizer = true;                   // false: each segment is one word
  PostProcessor post_processor;
  bool wordpiece_decoder = true;  // false: no decoder, tokens joined by spaces
  std::string decoder_prefix = "##";
  bool decoder_cleanup = true;
  std::string chat_template, bos_token, eos_token;
  std::string source;  // for error messages
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  explicit WordPieceTokenizer(WordPieceSpec spec);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  // Later tokens of a stream: a word-initial piece gets its space, a "##" piece is glued.
  std::string decode_bytes_after(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string id_to_piece(int32_t id) const override;
  std::optional<int32_t> piece_to_id(std::string_view piece) const override;
  bool is_special(int32_t id) const override;
  const std::string& chat_template() const override { return chat_template_; }
  const std::string& bos_token() const override { return bos_token_; }
  const std::string& eos_token() const override { return eos_token_; }

  // Greedy longest-match-first on one pre-tokenized word; [UNK] when too long or unmatchable.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  struct ViewHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using PieceMap = std::unordered_map<std::string, int32_t, ViewHash, std::equal_to<>>;

  // Piece -> id for the greedy match: open addressing over one flat array (hash, place in an arena,
  // id), so a candidate that is not there usually costs one cache line and no pointer chasing.
  class PieceTable {
   public:
    void insert(std::string_view piece, int32_t id);  // the first insert of a piece wins
    int32_t find(std::string_view piece) const;        // -1 when absent
    std::size_t longest() const { return longest_; }

   private:
    struct Slot {
      uint32_t hash = 0, offset = 0, length = 0;
      int32_t id = -1;
    };
    void grow();
    std::vector<Slot> slots_ = std::vector<Slot>(16);
    std::size_t used_ = 0, longest_ = 0;
    std::string arena_;
  };

  void encode_segment(std::string_view segment, std::vector<int32_t>& out) const;
  void encode_words(std::string_view normalized, std::vector<int32_t>& out) const;
  std::string decode_from(std::span<const int32_t> ids, bool skip_special_tokens, bool at_text_start) const;
  void check_id(int32_t id) const;

  PieceTable word_start_;    // the whole vocabulary: a word's first piece
  PieceTable continuation_;  // pieces with the continuing prefix, keyed without it
  int32_t unk_id_ = 0;
  std::size_t max_input_chars_per_word_ = 100;

  std::vector<std::string> pieces_;  // id -> token string ("" for unused ids)
  std::vector<uint8_t> special_;
  PieceMap piece_to_id_;  // vocabulary and added tokens

  AddedTokenMatcher added_tokens_;             // matched in the raw text
  AddedTokenMatcher normalized_added_tokens_;  // matched in the normalized text
  bool has_normalized_added_tokens_ = false;
  std::optional<BertNormalizerOptions> normalizer_;
  bool bert_pre_tokenizer_ = true;
  PostProcessor post_processor_;
  bool wordpiece_decoder_ = true;
  std::string decoder_prefix_;
  bool decoder_cleanup_ = true;
  std::string chat_template_, bos_token_, eos_token_;
};

}  // namespace inferlab::tokenizer_detail
