// BPE tokenizers identical to Hugging Face tokenizers: byte-level (GPT-2 / Qwen2 / Llama-3 family) and
// SentencePiece-style with byte fallback (Llama 2, Mistral, Gemma), from tokenizer.json or GGUF.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab {

class Tokenizer {
 public:
  // tokenizer.json, else vocab.json + merges.txt, in a model folder; tokenizer_config.json supplies
  // the chat template and special tokens when present.
  static std::shared_ptr<const Tokenizer> from_folder(const std::filesystem::path& folder);
  static std::shared_ptr<const Tokenizer> from_tokenizer_json(const std::filesystem::path& file);
  static std::shared_ptr<const Tokenizer> from_vocab_merges(const std::filesystem::path& vocab_json,
                                                            const std::filesystem::path& merges_txt);
  static std::shared_ptr<const Tokenizer> from_gguf(const std::filesystem::path& file);
  // A model folder, a tokenizer.json, a .gguf file, or an HF repo id (resolve_model_path).
  static std::shared_ptr<const Tokenizer> load(const std::string& model);

  virtual ~Tokenizer() = default;

  // add_special_tokens: apply the post-processor (e.g. a BOS). Special tokens in the text are
  // matched before BPE.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const = 0;
  // Text as Hugging Face decodes it: byte sequences that are not valid UTF-8 become U+FFFD.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  // The raw bytes the ids stand for (no U+FFFD replacement): decode_bytes(encode(s)) == s for any byte
  // string s the normalizer leaves unchanged (invalid UTF-8 included).
  virtual std::string decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  // decode_bytes of ids that continue earlier output (a stream's later tokens): without the
  // start-of-text rule some tokenizers have (SentencePiece drops the text's leading space).
  virtual std::string decode_bytes_after(std::span<const int32_t> ids, bool skip_special_tokens = false) const {
    return decode_bytes(ids, skip_special_tokens);
  }

  virtual int vocab_size() const = 0;
  virtual std::string id_to_piece(int32_t id) const = 0;  // the vocab string, e.g. "Ġworld"
  virtual std::optional<int32_t> piece_to_id(std::string_view piece) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  // From tokenizer_config.json (empty when absent).
  virtual const std::string& chat_template() const = 0;
  virtual const std::string& bos_token() const = 0;
  virtual const std::string& eos_token() const = 0;
};

// Streaming detokenizer: fed one id at a time, returns only complete UTF-8 text, never a broken
// sequence; concatenated output equals decode() of all ids.
class StreamDecoder {
 public:
  StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens = true);
  std::string push(int32_t id);
  std::string flush();  // whatever is still held back at the end of the stream

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  bool started_ = false;  // a token has been output: later ones decode with decode_bytes_after
  std::string pending_;
};

}  // namespace inferlab
