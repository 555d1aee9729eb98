// The token side of constrained decoding: every token's bytes, sorted so that tokens sharing a
// prefix are neighbours (the sorted list with its longest-common-prefix array is a flattened trie:
// walking it against the grammar steps each shared prefix once).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab {

class TokenVocabulary {
 public:
  // token_bytes[id]: the token's raw bytes; empty for tokens a grammar never allows (special
  // tokens such as EOS, which the matcher's caller handles).
  explicit TokenVocabulary(std::vector<std::string> token_bytes);

  int size() const { return static_cast<int>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& sorted() const { return sorted_; }  // ids with bytes, by bytes
  const std::vector<uint32_t>& lcp() const { return lcp_; }       // lcp[i]: common prefix of sorted[i-1] and sorted[i]

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_;
  std::vector<uint32_t> lcp_;
};

}  // namespace inferlab
