// SentencePiece-style BPE (Llama 2, Mistral, Gemma): vocab strings are literal UTF-8 with "▁" for a
// space, a word starts as one symbol per character, and a character missing from the vocabulary
// falls back to its <0xNN> byte tokens. The pipeline (added tokens, normalizers, pre-tokenizers,
// merges, post-processor) is BpeTokenizer's.
#pragma once
#include "tokenizer/bpe_tokenizer.h"

namespace inferlab::tokenizer_detail {

// What the decoder does at the start of the text (tokenizer.json's decoder, or GGUF's add_space_prefix).
enum class SpmTextStart {
  Keep,               // nothing
  StripSpace,         // Strip decoder (start 1): the text's first space is dropped
  DropFirstMetaspace  // Metaspace decoder: the first token's "▁" are dropped
};

struct SpmOptions {
  bool byte_fallback = true;
  int32_t unk_id = -1;  // -1: none
  bool fuse_unk = true;
  SpmTextStart text_start = SpmTextStart::Keep;
};

class SpmBpeTokenizer final : public BpeTokenizer {
 public:
  SpmBpeTokenizer(Spec spec, SpmOptions options);
  std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  std::string decode_bytes_after(std::span<const int32_t> ids, bool skip_special_tokens) const override;

 protected:
  std::size_t initial_ids(std::string_view word, int32_t* out) const override;
  std::optional<int32_t> whole_word_id(std::string_view word) const override;

 private:
  std::string decode_from(std::span<const int32_t> ids, bool skip_special_tokens, bool at_text_start) const;
  SpmOptions options_;
  std::array<int32_t, 256> byte_tokens_{};  // <0xNN> ids, -1 where missing
  bool all_byte_tokens_ = false;
};

// The bytes a SentencePiece vocab string stands for: <0xNN> is that byte, "▁" is a space.
bool spm_piece_bytes(std::string_view piece, std::string& out);

}  // namespace inferlab::tokenizer_detail
