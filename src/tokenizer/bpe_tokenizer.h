// The BPE tokenizer behind inferlab::Tokenizer, built by the loaders (tokenizer.json, vocab.json +
// merges.txt, GGUF): byte-level BPE here; SentencePiece-style BPE (spm_bpe.h) derives from it.
#pragma once
#include <array>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "inferlab/tokenizer/tokenizer.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"

namespace inferlab::tokenizer_detail {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

enum class PrependScheme { Always, First, Never };

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Metaspace } kind;
  std::shared_ptr<Regex> regex = nullptr;  // Split, ByteLevel with use_regex, Metaspace with split
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
  std::string replacement = {};   // Metaspace: what a space becomes ("▁")
  PrependScheme prepend = PrependScheme::Always;  // Metaspace
};

// TemplateProcessing / Roberta / Bert reduce to: ids before and after the sequence.
struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
};

struct Spec {
  std::unordered_map<std::string, int32_t> vocab;  // byte-level piece -> id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<int32_t> merge_ranks;  // one per merge when ranks repeat (SentencePiece scores); else empty
  std::vector<AddedToken> added_tokens;
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  PostProcessor post_processor;
  bool ignore_merges = false;  // Llama-3: a word found whole in the vocab is one token
  std::string chat_template, bos_token, eos_token;
  std::string source;  // for error messages
};

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(Spec spec);  // byte-level: every vocab string is in GPT-2's byte alphabet
  ~BpeTokenizer() override;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  std::string id_to_piece(int32_t id) const override;
  std::optional<int32_t> piece_to_id(std::string_view piece) const override;
  bool is_special(int32_t id) const override;
  const std::string& chat_template() const override { return chat_template_; }
  const std::string& bos_token() const override { return bos_token_; }
  const std::string& eos_token() const override { return eos_token_; }

  void set_chat_template(std::string t) { chat_template_ = std::move(t); }
  void set_bos_eos(std::string bos, std::string eos) { bos_token_ = std::move(bos); eos_token_ = std::move(eos); }
  void set_post_processor(PostProcessor p) { post_processor_ = std::move(p); }

 protected:
  // The bytes a vocab string stands for; false when it is not of this tokenizer's form.
  using PieceBytes = bool (*)(std::string_view piece, std::string& out);
  // byte_level: most vocab strings must pass piece_bytes, and added tokens decode as written;
  // otherwise added tokens go through piece_bytes too (SentencePiece's "▁▁" decodes to two spaces).
  BpeTokenizer(Spec spec, PieceBytes piece_bytes, bool byte_level);
  // The ids a pre-tokenized word starts as before any merge; at most word.size() of them.
  // Byte-level: one per byte.
  virtual std::size_t initial_ids(std::string_view word, int32_t* out) const;
  // With ignore_merges: the id of a word found whole in the vocabulary.
  virtual std::optional<int32_t> whole_word_id(std::string_view word) const;
  // The id of a vocab string (not an added token), or -1.
  int32_t vocab_id(std::string_view piece) const;
  const std::string& bytes_of(int32_t id) const { return bytes_[id]; }
  bool skipped(int32_t id, bool skip_special_tokens) const { return skip_special_tokens && special_[id]; }
  void check_id(int32_t id) const;

 private:
  struct Merge {
    int32_t rank, merged;
  };
  void encode_segment(std::string_view segment, bool at_text_start, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void bpe(std::string_view word, std::vector<int32_t>& out) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::vector<std::string> pieces_;  // id -> vocab string ("" for unused ids)
  std::vector<std::string> bytes_;   // id -> raw bytes it stands for
  std::vector<uint8_t> special_;     // id -> 1 when a special added token
  std::vector<uint8_t> added_;       // id -> 1 when an added token (decoded as its content)
  std::unordered_map<std::string, int32_t> piece_to_id_;
  std::unordered_map<std::string, int32_t> vocab_ids_;  // model vocab only (no added tokens)
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::array<int32_t, 256> byte_ids_{};
  // Open-addressing table of (left, right) -> merge; key and value share a cache line.
  struct MergeSlot {
    uint64_t key;
    Merge merge;
  };
  std::vector<MergeSlot> merge_table_;
  uint64_t merge_mask_ = 0;

  AddedTokenMatcher added_tokens_;
  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizerStep> pre_tokenizers_;
  PostProcessor post_processor_;
  bool ignore_merges_ = false;
  std::string chat_template_, bos_token_, eos_token_;

  // Word cache: sharded so encode() from several threads rarely contends; looked up by
  // string_view (no allocation per word).
  struct ViewHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct CacheShard {
    mutable std::shared_mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, ViewHash, std::equal_to<>> words;
  };
  static constexpr int kCacheShards = 16;
  static constexpr std::size_t kCacheShardCapacity = 8192;
  static constexpr std::size_t kCacheMaxWordBytes = 64;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

// GPT-2's reversible byte <-> printable code point table.
const std::array<char32_t, 256>& byte_to_unicode();
// A byte-level vocab string back to raw bytes; false when it contains a character outside the table.
bool byte_level_to_bytes(std::string_view piece, std::string& out);

}  // namespace inferlab::tokenizer_detail
