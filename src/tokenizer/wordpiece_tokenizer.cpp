#include "tokenizer/wordpiece_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "inferlab/util/error.h"
#include "tokenizer/utf8.h"

namespace inferlab::tokenizer_detail {

// ---------------------------------------------------------------------------------------------
// Character classes, as Hugging Face tokenizers (Rust) defines them

namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The code point at text[i] of valid UTF-8, and its length.
std::size_t decode_at(std::string_view text, std::size_t i, char32_t& cp) {
  auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  auto next = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(text[i + k]) & 0x3F); };
  if (b0 < 0xE0) {
    cp = (static_cast<char32_t>(b0 & 0x1F) << 6) | next(1);
    return 2;
  }
  if (b0 < 0xF0) {
    cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (next(1) << 6) | next(2);
    return 3;
  }
  cp = (static_cast<char32_t>(b0 & 0x07) << 18) | (next(1) << 12) | (next(2) << 6) | next(3);
  return 4;
}

// Rust's char::is_whitespace (Unicode White_Space).
bool is_white_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

// BertNormalizer's "control": Unicode C* categories except unassigned (Cn), with \t \n \r
// counted as whitespace instead.
bool is_control(char32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  auto c = category(cp);
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CS;
}

// The CJK Unified Ideographs blocks BertNormalizer puts spaces around (not kana, not Hangul).
bool is_chinese_char(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Rust's char::to_lowercase: the simple mapping, except U+0130 (İ), whose full mapping is two
// characters (SpecialCasing.txt's only unconditional lowercase entry).
void append_lowercase(std::string& out, char32_t cp) {
  if (cp == 0x130) {
    out += "i\xCC\x87";
    return;
  }
  utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

std::string nfd(std::string_view text) {
  utf8proc_uint8_t* mapped = nullptr;
  auto length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                             &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE));
  if (length < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
  std::string out(reinterpret_cast<char*>(mapped), static_cast<std::size_t>(length));
  std::free(mapped);
  return out;
}

// BertPreTokenizer without building a vector: on_word(view) for each word, in order.
template <class OnWord>
void for_each_bert_word(std::string_view text, OnWord&& on_word) {
  std::size_t start = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp;
    std::size_t n = decode_at(text, i, cp);
    if (is_white_space(cp) || is_bert_punctuation(cp)) {
      if (in_word) on_word(text.substr(start, i - start));
      in_word = false;
      if (!is_white_space(cp)) on_word(text.substr(i, n));
    } else if (!in_word) {
      start = i;
      in_word = true;
    }
    i += n;
  }
  if (in_word) on_word(text.substr(start));
}

}  // namespace

bool is_bert_punctuation(char32_t cp) {
  if (cp < 0x80) return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------------------------
// BertNormalizer: clean_text, handle_chinese_chars, strip_accents, lowercase, in that order

std::string bert_normalize(std::string_view input, const BertNormalizerOptions& options) {
  std::string repaired;
  std::string_view text = input;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid_lossy(text);
    text = repaired;
  }
  // First pass: cleaning and CJK spacing. ASCII letters are lowercased here already: they have no
  // decomposition and are no marks, so doing it before strip_accents changes nothing.
  std::string out;
  out.reserve(text.size() + 8);
  bool non_ascii = false;
  for (std::size_t i = 0; i < text.size();) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      ++i;
      if (options.clean_text) {
        if (b == '\t' || b == '\n' || b == '\r') {
          out += ' ';
          continue;
        }
        if (b < 0x20 || b == 0x7F) continue;  // NUL and the other controls (\v and \f are Cc: dropped)
      }
      out += static_cast<char>(options.lowercase && b >= 'A' && b <= 'Z' ? b + 32 : b);
      continue;
    }
    char32_t cp;
    std::size_t n = decode_at(text, i, cp);
    std::string_view bytes = text.substr(i, n);
    i += n;
    non_ascii = true;
    if (options.clean_text) {
      if (cp == 0xFFFD || is_control(cp)) continue;
      if (is_white_space(cp)) {
        out += ' ';
        continue;
      }
    }
    if (options.handle_chinese_chars && is_chinese_char(cp)) {
      out += ' ';
      out += bytes;
      out += ' ';
      continue;
    }
    out += bytes;
  }
  if (!non_ascii || !(options.strip_accents || options.lowercase)) return out;
  std::string decomposed;
  std::string_view source = out;
  if (options.strip_accents) {
    decomposed = nfd(out);
    source = decomposed;
  }
  std::string result;
  result.reserve(source.size());
  for (std::size_t i = 0; i < source.size();) {
    if (auto b = static_cast<unsigned char>(source[i]); b < 0x80) {  // ASCII can come out of NFD ("Å": "A" + ring)
      result += static_cast<char>(options.lowercase && b >= 'A' && b <= 'Z' ? b + 32 : b);
      ++i;
      continue;
    }
    char32_t cp;
    std::size_t n = decode_at(source, i, cp);
    if (options.strip_accents && category(cp) == UTF8PROC_CATEGORY_MN) {
      i += n;
      continue;
    }
    if (options.lowercase) append_lowercase(result, cp);
    else result.append(source, i, n);
    i += n;
  }
  return result;
}

void bert_pre_tokenize(std::string_view text, std::vector<std::string_view>& words) {
  for_each_bert_word(text, [&](std::string_view word) { words.push_back(word); });
}

void wordpiece_cleanup(std::string& token) {
  // Hugging Face applies these replacements in this order, each to the whole token.
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},    {" ?", "?"},   {" !", "!"},   {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  if (token.find(' ') == std::string::npos) return;
  for (const auto& [from, to] : kReplacements) {
    for (std::size_t at = 0; (at = token.find(from, at)) != std::string::npos; at += to.size())
      token.replace(at, from.size(), to);
  }
}

// ---------------------------------------------------------------------------------------------
// Piece table

namespace {

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, s.data() + i, 8);
    h = (h ^ chunk) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, s.data() + i, s.size() - i);
    h = (h ^ chunk) * 0xC4CEB9FE1A85EC53ull;
  }
  h ^= h >> 32;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

}  // namespace

void WordPieceTokenizer::PieceTable::insert(std::string_view piece, int32_t id) {
  if (find(piece) >= 0) return;
  if ((used_ + 1) * 2 > slots_.size()) grow();
  auto hash = static_cast<uint32_t>(hash_bytes(piece));
  std::size_t mask = slots_.size() - 1;
  std::size_t at = hash & mask;
  while (slots_[at].id >= 0) at = (at + 1) & mask;
  slots_[at] = {hash, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(piece.size()), id};
  arena_.append(piece);
  ++used_;
  longest_ = std::max(longest_, piece.size());
}

void WordPieceTokenizer::PieceTable::grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.id < 0) continue;
    std::size_t at = slot.hash & mask;
    while (slots_[at].id >= 0) at = (at + 1) & mask;
    slots_[at] = slot;
  }
}

int32_t WordPieceTokenizer::PieceTable::find(std::string_view piece) const {
  auto hash = static_cast<uint32_t>(hash_bytes(piece));
  std::size_t mask = slots_.size() - 1;
  for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
    const Slot& slot = slots_[at];
    if (slot.id < 0) return -1;
    if (slot.hash == hash && slot.length == piece.size() && arena_.compare(slot.offset, slot.length, piece) == 0) return slot.id;
  }
}

// ---------------------------------------------------------------------------------------------
// Construction

WordPieceTokenizer::WordPieceTokenizer(WordPieceSpec spec)
    : max_input_chars_per_word_(spec.max_input_chars_per_word),
      normalizer_(spec.normalizer),
      bert_pre_tokenizer_(spec.bert_pre_tokenizer),
      post_processor_(std::move(spec.post_processor)),
      wordpiece_decoder_(spec.wordpiece_decoder),
      decoder_prefix_(std::move(spec.decoder_prefix)),
      decoder_cleanup_(spec.decoder_cleanup),
      chat_template_(std::move(spec.chat_template)),
      bos_token_(std::move(spec.bos_token)),
      eos_token_(std::move(spec.eos_token)) {
  int32_t max_id = -1;
  for (const auto& [piece, id] : spec.vocab) {
    if (id < 0) fail("{}: vocab entry {:?} has negative id {}", spec.source, piece, id);
    max_id = std::max(max_id, id);
  }
  for (const auto& token : spec.added_tokens) {
    if (token.id < 0) fail("{}: added token {:?} has negative id {}", spec.source, token.content, token.id);
    if (token.content.empty()) fail("{}: added token with id {} has empty content", spec.source, token.id);
    max_id = std::max(max_id, token.id);
  }
  if (max_id < 0) fail("{}: the vocabulary is empty", spec.source);
  if (max_id > 16'000'000) fail("{}: token id {} is implausibly large", spec.source, max_id);
  auto unk = spec.vocab.find(spec.unk_token);
  if (unk == spec.vocab.end()) fail("{}: model.unk_token {:?} is not in model.vocab", spec.source, spec.unk_token);
  unk_id_ = unk->second;
  for (const auto* ids : {&post_processor_.prefix, &post_processor_.suffix})
    for (int32_t id : *ids)
      if (id < 0 || id > max_id) fail("{}: post_processor adds token id {}, outside the vocabulary", spec.source, id);

  pieces_.resize(max_id + 1);
  special_.assign(max_id + 1, 0);
  const std::string& prefix = spec.continuing_subword_prefix;
  for (auto& [piece, id] : spec.vocab) {
    pieces_[id] = piece;
    piece_to_id_.emplace(piece, id);
    word_start_.insert(piece, id);
    if (piece.starts_with(prefix) && piece.size() > prefix.size())
      continuation_.insert(std::string_view(piece).substr(prefix.size()), id);
  }
  std::vector<AddedToken> raw, normalized;
  for (auto& token : spec.added_tokens) {
    // A normalized token is stored and matched as the normalizer writes it ("<Entity>" -> "<entity>").
    if (token.normalized && normalizer_) token.content = bert_normalize(token.content, *normalizer_);
    if (token.content.empty()) continue;
    pieces_[token.id] = token.content;
    special_[token.id] = token.special;
    piece_to_id_[token.content] = token.id;
    (token.normalized ? normalized : raw).push_back(std::move(token));
  }
  has_normalized_added_tokens_ = !normalized.empty();
  added_tokens_ = AddedTokenMatcher(std::move(raw));
  normalized_added_tokens_ = AddedTokenMatcher(std::move(normalized));
}

// ---------------------------------------------------------------------------------------------
// Encode

void WordPieceTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  std::size_t chars = 0;
  for (char c : word) chars += !is_continuation_byte(c);
  if (chars > max_input_chars_per_word_) {
    out.push_back(unk_id_);
    return;
  }
  const std::size_t first = out.size();
  for (std::size_t start = 0; start < word.size();) {
    const PieceTable& pieces = start == 0 ? word_start_ : continuation_;
    // No piece is longer than the longest in the vocabulary: start there, on a character boundary.
    std::size_t end = std::min(word.size(), start + pieces.longest());
    while (end > start && end < word.size() && is_continuation_byte(word[end])) --end;
    int32_t id = -1;
    while (end > start) {
      if ((id = pieces.find(word.substr(start, end - start))) >= 0) break;
      do --end;
      while (end > start && is_continuation_byte(word[end]));
    }
    if (id < 0) {  // some remainder matches no piece: the whole word is unknown
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(id);
    start = end;
  }
}

void WordPieceTokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& out) const {
  if (segment.empty()) return;
  std::string normalized;
  std::string_view text = segment;
  if (normalizer_) {
    normalized = bert_normalize(segment, *normalizer_);
    text = normalized;
  } else if (!utf8::is_valid(segment)) {
    normalized = utf8::to_valid_lossy(segment);
    text = normalized;
  }
  if (!has_normalized_added_tokens_) {
    encode_words(text, out);
    return;
  }
  normalized_added_tokens_.split(
      text, [&](std::string_view part, bool) { encode_words(part, out); }, [&](int32_t id) { out.push_back(id); });
}

void WordPieceTokenizer::encode_words(std::string_view text, std::vector<int32_t>& out) const {
  if (!bert_pre_tokenizer_) {
    if (!text.empty()) encode_word(text, out);
    return;
  }
  for_each_bert_word(text, [&](std::string_view word) { encode_word(word, out); });
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 4);
  if (add_special_tokens) out.insert(out.end(), post_processor_.prefix.begin(), post_processor_.prefix.end());
  added_tokens_.split(
      text, [&](std::string_view segment, bool) { encode_segment(segment, out); }, [&](int32_t id) { out.push_back(id); });
  if (add_special_tokens) out.insert(out.end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decode

void WordPieceTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(pieces_.size()))
    fail("token id {} is out of range (vocabulary size {})", id, pieces_.size());
}

std::string WordPieceTokenizer::decode_from(std::span<const int32_t> ids, bool skip_special_tokens, bool at_text_start) const {
  std::string out, token;
  bool first = at_text_start;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special_tokens && special_[id]) continue;
    const std::string& piece = pieces_[id];
    if (!wordpiece_decoder_) {  // no decoder: Hugging Face joins the tokens with spaces
      if (!first) out += ' ';
      out += piece;
      first = false;
      continue;
    }
    // The WordPiece decoder: after the first token, a prefixed piece loses its prefix (glued to the
    // word), any other gets a space in front; cleanup then applies to each token on its own.
    if (first) token = piece;
    else if (piece.starts_with(decoder_prefix_)) token.assign(piece, decoder_prefix_.size());
    else {
      token = ' ';
      token += piece;
    }
    if (decoder_cleanup_) wordpiece_cleanup(token);
    out += token;
    first = false;
  }
  return out;
}

std::string WordPieceTokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_from(ids, skip_special_tokens, true);
}

std::string WordPieceTokenizer::decode_bytes_after(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_from(ids, skip_special_tokens, false);
}

std::string WordPieceTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return utf8::to_valid_lossy(decode_from(ids, skip_special_tokens, true));
}

std::string WordPieceTokenizer::id_to_piece(int32_t id) const {
  check_id(id);
  return pieces_[id];
}

std::optional<int32_t> WordPieceTokenizer::piece_to_id(std::string_view piece) const {
  auto it = piece_to_id_.find(piece);
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

bool WordPieceTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id];
}

}  // namespace inferlab::tokenizer_detail
