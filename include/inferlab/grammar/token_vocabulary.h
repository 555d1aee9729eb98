// The token side of constrained decoding: every token's bytes, and a byte trie of them, so that a
// walk of the vocabulary against the grammar steps each shared prefix once and leaves a subtree
// the moment its prefix fails.
#pragma once
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

  // Trie node 0 is the root (the empty prefix). A node's children are consecutive, by byte.
  struct TrieNode {
    uint8_t byte;
    uint32_t first_child, child_count;
    uint32_t tokens_begin, tokens_end;  // into trie_tokens(): the ids whose bytes end here
  };
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  std::size_t max_token_bytes() const { return max_bytes_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  std::size_t max_bytes_ = 0;
};

}  // namespace inferlab
