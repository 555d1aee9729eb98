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

BpeTokenizer::BpeTokenizer(Spec spec) : BpeTokenizer(std::move(spec), byte_level_to_bytes, true) {}

BpeTokenizer::BpeTokenizer(Spec spec, PieceBytes piece_bytes, bool byte_level)
    : normalizers_(std::move(spec.normalizers)),
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
  for (const auto& token : spec.added_tokens) {
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
    if (!piece_bytes(piece, raw)) {
      // A few literal entries (control tokens) are fine; a whole vocabulary of them is SentencePiece.
      ++not_byte_level;
      if (example.empty()) example = piece;
      raw = piece;
    }
    pieces_[id] = piece;
    bytes_[id] = raw;
    bytes_to_id_.emplace(raw, id);
    piece_to_id_.emplace(piece, id);
    vocab_ids_.emplace(piece, id);
  }
  if (byte_level && not_byte_level > spec.vocab.size() / 100 + 8)
    fail("{}: {} vocab entries (e.g. {:?}) are not byte-level BPE (characters outside GPT-2's byte table); "
         "byte-level BPE (GPT-2, Qwen2, Llama-3 families) needs them all to be; SentencePiece-style vocabularies "
         "need model.byte_fallback or a ByteFallback/Metaspace decoder",
         spec.source, not_byte_level, example);
  for (const auto& token : spec.added_tokens) {
    pieces_[token.id] = token.content;
    if (byte_level || !piece_bytes(token.content, bytes_[token.id])) bytes_[token.id] = token.content;
    special_[token.id] = token.special;
    added_[token.id] = 1;
    piece_to_id_[token.content] = token.id;
  }
  added_tokens_ = AddedTokenMatcher(std::move(spec.added_tokens));
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = it == bytes_to_id_.end() ? -1 : it->second;
  }

  std::size_t capacity = 16;
  while (capacity < spec.merges.size() * 2 + 16) capacity <<= 1;
  merge_table_.assign(capacity, MergeSlot{kEmptyKey, {0, 0}});
  merge_mask_ = capacity - 1;
  if (!spec.merge_ranks.empty() && spec.merge_ranks.size() != spec.merges.size())
    fail("{}: {} merge ranks for {} merges", spec.source, spec.merge_ranks.size(), spec.merges.size());
  for (std::size_t index = 0; index < spec.merges.size(); ++index) {
    const auto& [left, right] = spec.merges[index];
    int32_t rank = spec.merge_ranks.empty() ? static_cast<int32_t>(index) : spec.merge_ranks[index];
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

std::size_t BpeTokenizer::initial_ids(std::string_view word, int32_t* out) const {
  for (std::size_t i = 0; i < word.size(); ++i) {
    int32_t id = byte_ids_[static_cast<unsigned char>(word[i])];
    if (id < 0) fail("byte 0x{:02X} has no token in this vocabulary", static_cast<unsigned char>(word[i]));
    out[i] = id;
  }
  return word.size();
}

std::optional<int32_t> BpeTokenizer::whole_word_id(std::string_view word) const {
  auto it = bytes_to_id_.find(std::string(word));
  if (it == bytes_to_id_.end()) return std::nullopt;
  return it->second;
}

int32_t BpeTokenizer::vocab_id(std::string_view piece) const {
  auto it = vocab_ids_.find(std::string(piece));
  return it == vocab_ids_.end() ? -1 : it->second;
}

void BpeTokenizer::bpe(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto id = whole_word_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() <= 64) {
    // Short words, on the stack: keep the rank of each adjacent pair and rescan for the best
    // (leftmost lowest) merge.
    int32_t ids[64], ranks[64], merged[64];
    std::size_t n = initial_ids(word, ids);
    if (n < 2) {
      out.insert(out.end(), ids, ids + n);
      return;
    }
    std::size_t count = n;
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
  std::vector<int32_t> ids(word.size());
  std::size_t n = initial_ids(word, ids.data());
  ids.resize(n);
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

void BpeTokenizer::encode_segment(std::string_view segment, bool at_text_start, std::vector<int32_t>& out) const {
  if (segment.empty()) return;
  std::string normalized;
  std::string_view text = segment;
  bool unchanged = std::all_of(normalizers_.begin(), normalizers_.end(), [&](const Normalizer& n) {
    return n.kind == NormalizerKind::NFC && nfc_inert(segment);  // not NFD: Hangul syllables decompose
  });
  if (!unchanged) {
    normalized = std::string(segment);
    for (const Normalizer& n : normalizers_) normalized = apply_normalizer(n, normalized);
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
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      std::string_view piece = pieces[k];
      if (step.kind == PreTokenizerStep::Kind::ByteLevel && step.add_prefix_space && !piece.starts_with(' ')) {
        arena.push_back(" " + std::string(piece));
        piece = arena.back();
      }
      if (step.kind == PreTokenizerStep::Kind::Metaspace) {
        // Spaces become the replacement; a piece gets one in front per prepend_scheme ("first": only
        // the text's first piece, as Hugging Face decides by the piece's offset 0).
        std::string replaced;
        for (char c : piece) {
          if (c == ' ') replaced += step.replacement;
          else replaced += c;
        }
        bool first = at_text_start && k == 0 && piece.data() == text.data();
        if (!replaced.starts_with(step.replacement) &&
            (step.prepend == PrependScheme::Always || (step.prepend == PrependScheme::First && first)))
          replaced = step.replacement + replaced;
        arena.push_back(std::move(replaced));
        piece = arena.back();
        if (!step.regex) {
          next.push_back(piece);
          continue;
        }
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

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), post_processor_.prefix.begin(), post_processor_.prefix.end());
  // Added tokens are cut out first; the text between them goes through normalization,
  // pre-tokenization and BPE.
  added_tokens_.split(
      text, [&](std::string_view segment, bool at_text_start) { encode_segment(segment, at_text_start, out); },
      [&](int32_t id) { out.push_back(id); });
  if (add_special_tokens) out.insert(out.end(), post_processor_.suffix.begin(), post_processor_.suffix.end());
  return out;
}

void BpeTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(bytes_.size()))
    fail("token id {} is out of range (vocabulary size {})", id, bytes_.size());
}

std::string BpeTokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
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
