#include "tokenizer/bpe_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <functional>
#include <queue>

#include "inferlab/util/error.h"
#include "tokenizer/utf8.h"

namespace inferlab::tokenizer_detail {

// ---------------------------------------------------------------------------------------------
// Regex

namespace {

struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
  // Long runs (a 1 MB word) can outgrow PCRE2's default 32 KB JIT stack.
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    fail("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", error_offset,
         reinterpret_cast<char*>(message), pattern);
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

template <typename F>
void Regex::for_each_match(std::string_view subject, F&& on_match) const {
  ThreadMatchState& state = match_state();
  auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::size_t start = 0;
  while (start < subject.size()) {
    int rc = jit_ ? pcre2_jit_match(code_, text, subject.size(), start, 0, state.data, state.context)
                  : pcre2_match(code_, text, subject.size(), start, 0, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail("pre-tokenizer regex failed at byte {}: {}", start, reinterpret_cast<char*>(message));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    std::size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match: step over one code point and look again
      start = end + 1;
      while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    on_match(begin, end);
    start = end;
  }
}

// ---------------------------------------------------------------------------------------------
// Byte-level table

const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

bool byte_level_to_bytes(std::string_view piece, std::string& out) {
  static const std::vector<int> reverse = [] {
    std::vector<int> r(512, -1);
    const auto& t = byte_to_unicode();
    for (int b = 0; b < 256; ++b) r[t[b]] = b;
    return r;
  }();
  out.clear();
  std::size_t i = 0;
  while (i < piece.size()) {
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(piece.data() + i),
                              static_cast<utf8proc_ssize_t>(piece.size() - i), &cp);
    if (n <= 0 || cp >= 512 || reverse[cp] < 0) return false;
    out += static_cast<char>(reverse[cp]);
    i += static_cast<std::size_t>(n);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Construction

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t hash_key(uint64_t key) {
  key ^= key >> 29;
  key *= 0xBF58476D1CE4E5B9ull;
  key ^= key >> 32;
  return key;
}

constexpr uint64_t kEmptyKey = ~0ull;

}  // namespace

BpeTokenizer::BpeTokenizer(Spec spec)
    : added_tokens_(std::move(spec.added_tokens)),
      normalizers_(std::move(spec.normalizers)),
      pre_tokenizers_(std::move(spec.pre_tokenizers)),
      post_processor_(std::move(spec.post_processor)),
      ignore_merges_(spec.ignore_merges),
      chat_template_(std::move(spec.chat_template)),
      bos_token_(std::move(spec.bos_token)),
      eos_token_(std::move(spec.eos_token)) {
  // ByteLevel without regex or prefix space only maps bytes to the alphabet, which BPE on raw
  // bytes does not need (Qwen: Split then ByteLevel): dropping it lets encode take its fast path.
  std::erase_if(pre_tokenizers_, [](const PreTokenizerStep& step) {
    return step.kind == PreTokenizerStep::Kind::ByteLevel && !step.regex && !step.add_prefix_space;
  });
  int32_t max_id = -1;
  for (const auto& [piece, id] : spec.vocab) {
    if (id < 0) fail("{}: vocab entry {:?} has negative id {}", spec.source, piece, id);
    max_id = std::max(max_id, id);
  }
  for (const auto& token : added_tokens_) {
    if (token.id < 0) fail("{}: added token {:?} has negative id {}", spec.source, token.content, token.id);
    if (token.content.empty()) fail("{}: added token with id {} has empty content", spec.source, token.id);
    max_id = std::max(max_id, token.id);
  }
  if (max_id < 0) fail("{}: the vocabulary is empty", spec.source);
  if (max_id > 16'000'000) fail("{}: token id {} is implausibly large", spec.source, max_id);
  pieces_.resize(max_id + 1);
  bytes_.resize(max_id + 1);
  special_.assign(max_id + 1, 0);
  added_.assign(max_id + 1, 0);
  std::string raw;
  std::size_t not_byte_level = 0;
  std::string example;
  for (auto& [piece, id] : spec.vocab) {
    if (!byte_level_to_bytes(piece, raw)) {
      // A few literal entries (control tokens) are fine; a whole vocabulary of them is SentencePiece.
      ++not_byte_level;
      if (example.empty()) example = piece;
      raw = piece;
    }
    pieces_[id] = piece;
    bytes_[id] = raw;
    bytes_to_id_.emplace(raw, id);
    piece_to_id_.emplace(piece, id);
  }
  if (not_byte_level > spec.vocab.size() / 100 + 8)
    fail("{}: {} vocab entries (e.g. {:?}) are not byte-level BPE (characters outside GPT-2's byte table); "
         "only byte-level BPE tokenizers (GPT-2, Qwen2, Llama-3 families) are supported",
         spec.source, not_byte_level, example);
  for (const auto& token : added_tokens_) {
    pieces_[token.id] = token.content;
    bytes_[token.id] = token.content;
    special_[token.id] = token.special;
    added_[token.id] = 1;
    piece_to_id_[token.content] = token.id;
    added_first_byte_[static_cast<unsigned char>(token.content[0])] = 1;
  }
  // Longest first, so matching picks the longest added token at a position.
  std::stable_sort(added_tokens_.begin(), added_tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = it == bytes_to_id_.end() ? -1 : it->second;
  }

  std::size_t capacity = 16;
  while (capacity < spec.merges.size() * 2 + 16) capacity <<= 1;
  merge_table_.assign(capacity, MergeSlot{kEmptyKey, {0, 0}});
  merge_mask_ = capacity - 1;
  int32_t rank = 0;
  for (const auto& [left, right] : spec.merges) {
    auto l = piece_to_id_.find(left), r = piece_to_id_.find(right), m = piece_to_id_.find(left + right);
    if (l == piece_to_id_.end() || r == piece_to_id_.end() || m == piece_to_id_.end())
      fail("{}: merge {} (\"{} {}\") uses a piece missing from the vocabulary", spec.source, rank, left, right);
    uint64_t key = pair_key(l->second, r->second);
    for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      if (merge_table_[slot].key == key) break;  // a repeated merge keeps its first (best) rank
      if (merge_table_[slot].key == kEmptyKey) {
        merge_table_[slot] = {key, {rank, m->second}};
        break;
      }
    }
    ++rank;
  }
}

BpeTokenizer::~BpeTokenizer() = default;

const BpeTokenizer::Merge* BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  uint64_t key = pair_key(left, right);
  for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeSlot& entry = merge_table_[slot];
    if (entry.key == key) return &entry.merge;
    if (entry.key == kEmptyKey) return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// BPE on one pre-tokenized word (raw bytes)

void BpeTokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = bytes_to_id_.find(std::string(word)); it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::size_t n = word.size();
  auto byte_id = [&](std::size_t i) {
    int32_t id = byte_ids_[static_cast<unsigned char>(word[i])];
    if (id < 0) fail("byte 0x{:02X} has no token in this vocabulary", static_cast<unsigned char>(word[i]));
    return id;
  };
  if (n < 2) {
    out.push_back(byte_id(0));
    return;
  }
  if (n <= 64) {
    // Short words, on the stack: keep the rank of each adjacent pair and rescan for the best
    // (leftmost lowest) merge.
    int32_t ids[64], ranks[64], merged[64];
    std::size_t count = n;
    for (std::size_t i = 0; i < n; ++i) ids[i] = byte_id(i);
    auto rank_of = [&](std::size_t i) {
      const Merge* m = find_merge(ids[i], ids[i + 1]);
      ranks[i] = m ? m->rank : INT_MAX;
      merged[i] = m ? m->merged : -1;
    };
    for (std::size_t i = 0; i + 1 < n; ++i) rank_of(i);
    while (count > 1) {
      std::size_t best = 0;
      for (std::size_t i = 1; i + 1 < count; ++i)
        if (ranks[i] < ranks[best]) best = i;
      if (ranks[best] == INT_MAX) break;
      ids[best] = merged[best];
      // Drop symbol best+1 and pair best+1 (the pair it started).
      for (std::size_t i = best + 1; i + 1 < count; ++i) ids[i] = ids[i + 1];
      for (std::size_t i = best + 1; i + 2 < count; ++i) {
        ranks[i] = ranks[i + 1];
        merged[i] = merged[i + 1];
      }
      --count;
      if (best + 1 < count) rank_of(best);
      if (best > 0) rank_of(best - 1);
    }
    out.insert(out.end(), ids, ids + count);
    return;
  }
  std::vector<int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_id(i);
  // Long words: a heap of candidate merges over a linked list, O(n log n).
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<int32_t> prev(n), next(n);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = find_merge(ids[pos], ids[next[pos]])) heap.push({m->rank, pos, ids[pos], ids[next[pos]]});
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int32_t right = next[c.pos];
    if (ids[c.pos] != c.left || right < 0 || ids[right] != c.right) continue;  // stale
    ids[c.pos] = find_merge(c.left, c.right)->merged;
    ids[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kCacheMaxWordBytes) {
    bpe(word, out);
    return;
  }
  if (word.size() == 1) {
    bpe(word, out);
    return;
  }
  // The shard comes from the hash's high bits; the map itself uses the low ones.
  std::size_t hash = std::hash<std::string_view>{}(word);
  CacheShard& shard = cache_[(hash >> 56) % kCacheShards];
  {
    std::shared_lock lock(shard.mutex);
    if (auto it = shard.words.find(word); it != shard.words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::size_t start = out.size();
  bpe(word, out);
  std::unique_lock lock(shard.mutex);
  if (shard.words.size() < kCacheShardCapacity)
    shard.words.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
}

// ---------------------------------------------------------------------------------------------
// Normalization and pre-tokenization of the text between added tokens

namespace {

std::string apply_normalizer(NormalizerKind kind, std::string_view text) {
  if (kind != NormalizerKind::Lowercase) {
    // Code points below U+0300 are unchanged by every normalization form unless a combining mark
    // follows; lead bytes from 0xCC up start U+0300 and beyond.
    bool trivial = std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0xCC; });
    if (trivial && (kind == NormalizerKind::NFC || kind == NormalizerKind::NFD)) return std::string(text);
    if (kind != NormalizerKind::NFC && kind != NormalizerKind::NFD &&
        std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return std::string(text);
  }
  int options = UTF8PROC_STABLE;
  switch (kind) {
    case NormalizerKind::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalizerKind::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizerKind::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizerKind::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    case NormalizerKind::Lowercase: break;
  }
  std::string out;
  // Normalize each valid UTF-8 run; invalid bytes pass through untouched (see docs/tokenizer.md).
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t run_end = i;
    while (run_end < text.size()) {
      if (static_cast<unsigned char>(text[run_end]) < 0x80) { ++run_end; continue; }
      std::size_t n = utf8::sequence_length(text, run_end);
      if (n == 0) break;
      run_end += n;
    }
    std::string_view run = text.substr(i, run_end - i);
    if (kind == NormalizerKind::Lowercase) {
      for (std::size_t k = 0; k < run.size();) {
        utf8proc_int32_t cp = 0;
        auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(run.data() + k),
                                  static_cast<utf8proc_ssize_t>(run.size() - k), &cp);
        utf8::append(out, static_cast<char32_t>(utf8proc_tolower(cp)));
        k += static_cast<std::size_t>(n);
      }
    } else if (!run.empty()) {
      utf8proc_uint8_t* mapped = nullptr;
      auto length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                 static_cast<utf8proc_ssize_t>(run.size()), &mapped,
                                 static_cast<utf8proc_option_t>(options));
      if (length < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
      out.append(reinterpret_cast<char*>(mapped), static_cast<std::size_t>(length));
      std::free(mapped);
    }
    i = run_end;
    if (i < text.size()) out += text[i++];  // one invalid byte, as is
  }
  return out;
}

// True when NFC (and NFD) leave the text as it is: no character that decomposes canonically, has a
// non-zero combining class, or can be the second half of a composition (Hangul V/T jamo included).
// Most text (ASCII, CJK) passes, skipping utf8proc's decompose/recompose and its allocation.
bool nfc_inert(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0xCC) {  // below U+0300 (or invalid bytes, which normalization leaves alone)
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                              static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0) {
      ++i;
      continue;
    }
    i += static_cast<std::size_t>(n);
    if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
    const utf8proc_property_t* p = utf8proc_get_property(cp);
    if (p->combining_class != 0) return false;
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;
    if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  }
  return true;
}

struct Span {
  std::size_t begin, end;
  bool is_match;
};

void split_by(const PreTokenizerStep& step, std::string_view piece, std::vector<std::string_view>& out,
              std::vector<Span>& spans) {
  spans.clear();
  std::size_t last = 0;
  step.regex->for_each_match(piece, [&](std::size_t begin, std::size_t end) {
    if (begin > last) spans.push_back({last, begin, false});
    spans.push_back({begin, end, true});
    last = end;
  });
  if (last < piece.size()) spans.push_back({last, piece.size(), false});
  if (step.invert)
    for (auto& s : spans) s.is_match = !s.is_match;
  std::size_t first_out = out.size();
  auto view = [&](std::size_t b, std::size_t e) { return piece.substr(b, e - b); };
  auto extend_last_end = [&](std::size_t e) {
    std::string_view& v = out.back();
    v = std::string_view(v.data(), static_cast<std::size_t>(piece.data() + e - v.data()));
  };
  bool previous_match = false;
  switch (step.behavior) {
    case SplitBehavior::Isolated:
      for (auto& s : spans) out.push_back(view(s.begin, s.end));
      break;
    case SplitBehavior::Removed:
      for (auto& s : spans)
        if (!s.is_match) out.push_back(view(s.begin, s.end));
      break;
    case SplitBehavior::MergedWithPrevious:
      for (auto& s : spans) {
        if (s.is_match && !previous_match && out.size() > first_out) extend_last_end(s.end);
        else out.push_back(view(s.begin, s.end));
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::Contiguous:
      for (std::size_t k = 0; k < spans.size(); ++k) {
        if (k > 0 && spans[k].is_match == previous_match) extend_last_end(spans[k].end);
        else out.push_back(view(spans[k].begin, spans[k].end));
        previous_match = spans[k].is_match;
      }
      break;
    case SplitBehavior::MergedWithNext: {
      // Walk backwards, prepending each delimiter to the piece after it.
      std::vector<std::string_view> reversed;
      for (std::size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !previous_match && !reversed.empty()) {
          std::string_view& v = reversed.back();
          v = std::string_view(piece.data() + s.begin, static_cast<std::size_t>(v.data() + v.size() - (piece.data() + s.begin)));
        } else {
          reversed.push_back(view(s.begin, s.end));
        }
        previous_match = s.is_match;
      }
      out.insert(out.end(), reversed.rbegin(), reversed.rend());
      break;
    }
  }
}

}  // namespace

void BpeTokenizer::encode_segment(std::string_view segment, std::vector<int32_t>& out) const {
  if (segment.empty()) return;
  std::string normalized;
  std::string_view text = segment;
  bool unchanged = std::all_of(normalizers_.begin(), normalizers_.end(), [&](NormalizerKind kind) {
    return (kind == NormalizerKind::NFC || kind == NormalizerKind::NFD) && nfc_inert(segment);
  });
  if (!unchanged) {
    normalized = std::string(segment);
    for (NormalizerKind kind : normalizers_) normalized = apply_normalizer(kind, normalized);
    text = normalized;
  }
  // Fast path for the common single-regex pipeline: BPE each match as it is found.
  if (pre_tokenizers_.size() == 1 && pre_tokenizers_[0].regex && !pre_tokenizers_[0].add_prefix_space &&
      pre_tokenizers_[0].behavior == SplitBehavior::Isolated && !pre_tokenizers_[0].invert) {
    std::size_t last = 0;
    pre_tokenizers_[0].regex->for_each_match(text, [&](std::size_t begin, std::size_t end) {
      if (begin > last) encode_word(text.substr(last, begin - last), out);
      encode_word(text.substr(begin, end - begin), out);
      last = end;
    });
    if (last < text.size()) encode_word(text.substr(last), out);
    return;
  }
  std::deque<std::string> arena;  // pieces that gained a prefix space
  std::vector<std::string_view> pieces{text}, next;
  std::vector<Span> spans;
  for (const PreTokenizerStep& step : pre_tokenizers_) {
    next.clear();
    for (std::string_view piece : pieces) {
      if (step.kind == PreTokenizerStep::Kind::ByteLevel && step.add_prefix_space && !piece.starts_with(' ')) {
        arena.push_back(" " + std::string(piece));
        piece = arena.back();
      }
      if (step.regex) split_by(step, piece, next, spans);
      else next.push_back(piece);
    }
    pieces.swap(next);
  }
  for (std::string_view piece : pieces)
    if (!piece.empty()) encode_word(piece, out);
}

// ---------------------------------------------------------------------------------------------
// Encode / decode

namespace {

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_byte(char c) {
  auto b = static_cast<unsigned char>(c);
  return b >= 0x80 || std::isalnum(b) || c == '_';
}

}  // namespace

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), post_processor_.prefix.begin(), post_processor_.prefix.end());
  // Added tokens are cut out first (leftmost, longest); the text between them goes through
  // normalization, pre-tokenization and BPE.
  std::size_t segment_start = 0, i = 0;
  while (i < text.size()) {
    if (!added_first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const AddedToken* found = nullptr;
    for (const AddedToken& token : added_tokens_) {
      if (text.compare(i, token.content.size(), token.content) != 0) continue;
      if (token.single_word && ((i > 0 && is_word_byte(text[i - 1])) ||
                                (i + token.content.size() < text.size() && is_word_byte(text[i + token.content.size()]))))
        continue;
      found = &token;
      break;
    }
    if (!found) {
      ++i;
      continue;
    }
    std::size_t segment_end = i;
    if (found->lstrip)
      while (segment_end > segment_start && is_space_byte(text[segment_end - 1])) --segment_end;
    encode_segment(text.substr(segment_start, segment_end - segment_start), out);
    out.push_back(found->id);
    i += found->content.size();
    if (found->rstrip)
      while (i < text.size() && is_space_byte(text[i])) ++i;
    segment_start = i;
  }
  encode_segment(text.substr(segment_start), out);
  if (add_special_tokens) out.insert(out.end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  return out;
}

std::string BpeTokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(bytes_.size()))
      fail("token id {} is out of range (vocabulary size {})", id, bytes_.size());
    if (skip_special_tokens && special_[id]) continue;
    out += bytes_[id];
  }
  return out;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return utf8::to_valid_lossy(decode_bytes(ids, skip_special_tokens));
}

std::string BpeTokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(pieces_.size()))
    fail("token id {} is out of range (vocabulary size {})", id, pieces_.size());
  return pieces_[id];
}

std::optional<int32_t> BpeTokenizer::piece_to_id(std::string_view piece) const {
  auto it = piece_to_id_.find(std::string(piece));
  if (it == piece_to_id_.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(special_.size()) && special_[id];
}

}  // namespace inferlab::tokenizer_detail
