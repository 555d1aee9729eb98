// The token side of constrained decoding: every token's bytes, and a byte trie of them, so that a
// walk of the vocabulary against the grammar steps each shared prefix once and leaves a subtree
// the moment its prefix fails, or takes a whole subtree at once when the grammar's state loops on
// every byte below it (inside a JSON string most tokens are such subtrees).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab {

class TokenVocabulary {
 public:
  // token_bytes[id]: the token's raw bytes; empty for special tokens, which a grammar allows only
  // where it names them by id (<[id]>); EOS is otherwise the matcher's caller's.
  explicit TokenVocabulary(std::vector<std::string> token_bytes);

  int size() const { return static_cast<int>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  // Node 0 is the root (the empty prefix); a node's children are consecutive, by byte (a wide
  // node's children share cache lines). trie_tokens() holds the tokens sorted by bytes, which is
  // depth-first order, so a subtree's tokens are one run, [tokens_begin, subtree_tokens_end), the
  // node's own first: a mask takes or leaves a whole subtree at once.
  struct TrieNode {
    uint8_t byte = 0;
    bool only_ascii_below = true;  // no byte below this node is >= 0x80
    // Bit u (a place in a UTF-8 character, utf8_decoder): every byte string below this node, read
    // from place u, is well-formed UTF-8 (no surrogates or overlong forms), its last character
    // perhaps cut short. Bit 0: read from a character boundary.
    uint8_t utf8_below = 0xFF;
    uint8_t chars_below = 0;  // the most characters (bytes that do not continue one) on a path below; 255 at most
    uint32_t first_child = 0, child_count = 0;
    uint32_t tokens_begin = 0, tokens_end = 0;  // the ids whose bytes end here
    uint32_t subtree_tokens_end = 0;
    std::array<uint64_t, 2> ascii_below{};      // the ASCII bytes that occur below this node
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  // Per token of trie_tokens(): its characters, counted as bytes that do not continue one.
  const std::vector<uint16_t>& trie_token_chars() const { return trie_token_chars_; }
  // One bit per token id: the tokens with bytes (those in the trie).
  const std::vector<uint64_t>& byte_token_bits() const { return byte_token_bits_; }
  std::size_t max_token_bytes() const { return max_bytes_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  std::vector<uint16_t> trie_token_chars_;
  std::vector<uint64_t> byte_token_bits_;
  std::size_t max_bytes_ = 0;
};

// UTF-8 as a byte automaton: 0 is a character boundary, 1-7 the middle of a character (which
// continuation bytes may follow); -1 for a byte that cannot come next.
namespace utf8_decoder {
constexpr int kStates = 8;
constexpr bool continues(uint8_t b) { return b >= 0x80 && b <= 0xBF; }
constexpr int step(int state, uint8_t b) {
  switch (state) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xC2 && b <= 0xDF) return 1;
      if (b == 0xE0) return 4;
      if (b == 0xED) return 5;  // D800-DFFF (surrogates) excluded
      if (b >= 0xE1 && b <= 0xEF) return 2;
      if (b == 0xF0) return 6;
      if (b >= 0xF1 && b <= 0xF3) return 3;
      if (b == 0xF4) return 7;  // at most 10FFFF
      return -1;
    case 1: return b >= 0x80 && b <= 0xBF ? 0 : -1;
    case 2: return b >= 0x80 && b <= 0xBF ? 1 : -1;
    case 3: return b >= 0x80 && b <= 0xBF ? 2 : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    case 7: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    default: return -1;
  }
}
}  // namespace utf8_decoder

}  // namespace inferlab
