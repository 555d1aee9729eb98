#include "tokenizer/spm_bpe.h"

#include <fmt/format.h>

#include "inferlab/util/error.h"
#include "tokenizer/utf8.h"

namespace inferlab::tokenizer_detail {

namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 "▁"

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// <0xNN> -> NN, else -1 (Hugging Face's ByteFallback decoder: six characters, two hex digits).
int byte_token_value(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
  int high = hex_digit(piece[3]), low = hex_digit(piece[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

}  // namespace

bool spm_piece_bytes(std::string_view piece, std::string& out) {
  out.clear();
  if (int byte = byte_token_value(piece); byte >= 0) {
    out += static_cast<char>(byte);
    return true;
  }
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kMetaspace.size(), kMetaspace) == 0) {
      out += ' ';
      i += kMetaspace.size();
    } else {
      out += piece[i++];
    }
  }
  return true;
}

SpmBpeTokenizer::SpmBpeTokenizer(Spec spec, SpmOptions options)
    : BpeTokenizer(std::move(spec), spm_piece_bytes, false), options_(options) {
  all_byte_tokens_ = true;
  for (int b = 0; b < 256; ++b) {
    byte_tokens_[b] = vocab_id(fmt::format("<0x{:02X}>", b));
    all_byte_tokens_ = all_byte_tokens_ && byte_tokens_[b] >= 0;
  }
}

// Hugging Face's BPE word start: each character by its vocab id; a missing one becomes its byte
// tokens (byte_fallback, when all of them exist), else <unk> (consecutive ones fused into one).
std::size_t SpmBpeTokenizer::initial_ids(std::string_view word, int32_t* out) const {
  std::size_t n = 0;
  bool unk_pending = false;
  for (std::size_t i = 0; i < word.size();) {
    std::size_t length = utf8::sequence_length(word, i);
    if (length == 0) length = 1;  // an invalid byte stands alone (and falls back to its byte token)
    std::string_view character = word.substr(i, length);
    i += length;
    if (int32_t id = vocab_id(character); id >= 0) {
      if (unk_pending) out[n++] = options_.unk_id;
      unk_pending = false;
      out[n++] = id;
      continue;
    }
    bool bytes_known = options_.byte_fallback;
    for (char c : character) bytes_known = bytes_known && byte_tokens_[static_cast<unsigned char>(c)] >= 0;
    if (bytes_known) {
      if (unk_pending) out[n++] = options_.unk_id;
      unk_pending = false;
      for (char c : character) out[n++] = byte_tokens_[static_cast<unsigned char>(c)];
      continue;
    }
    if (options_.unk_id < 0)
      fail("character {:?} has no token, no byte token and the vocabulary has no unk_token", std::string(character));
    if (unk_pending && !options_.fuse_unk) out[n++] = options_.unk_id;
    unk_pending = true;
  }
  if (unk_pending) out[n++] = options_.unk_id;
  return n;
}

std::optional<int32_t> SpmBpeTokenizer::whole_word_id(std::string_view word) const {
  int32_t id = vocab_id(word);
  if (id < 0) return std::nullopt;
  return id;
}

std::string SpmBpeTokenizer::decode_from(std::span<const int32_t> ids, bool skip_special_tokens, bool at_text_start) const {
  std::string out;
  bool first = at_text_start;
  for (int32_t id : ids) {
    check_id(id);
    if (skipped(id, skip_special_tokens)) continue;
    const std::string& bytes = bytes_of(id);
    if (first && options_.text_start == SpmTextStart::DropFirstMetaspace && byte_token_value(id_to_piece(id)) < 0) {
      for (char c : bytes)
        if (c != ' ') out += c;
    } else {
      out += bytes;
    }
    first = false;
  }
  if (at_text_start && options_.text_start == SpmTextStart::StripSpace && out.starts_with(' ')) out.erase(0, 1);
  return out;
}

std::string SpmBpeTokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_from(ids, skip_special_tokens, true);
}

std::string SpmBpeTokenizer::decode_bytes_after(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_from(ids, skip_special_tokens, false);
}

}  // namespace inferlab::tokenizer_detail
