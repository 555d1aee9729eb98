#include "inferlab/grammar/token_vocabulary.h"

#include <algorithm>

namespace inferlab {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t> sorted;
  for (int32_t id = 0; id < static_cast<int32_t>(bytes_.size()); ++id)
    if (!bytes_[id].empty()) sorted.push_back(id);
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b); });
  for (int32_t id : sorted) max_bytes_ = std::max(max_bytes_, bytes_[id].size());

  // Breadth by depth is not needed: children must only be consecutive. Build with temporary
  // child lists, then lay each node's children out together.
  struct Building {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Building> nodes(1);
  for (int32_t id : sorted) {
    uint32_t at = 0;
    for (unsigned char c : bytes_[id]) {
      auto& children = nodes[at].children;
      if (children.empty() || children.back().first != c) {  // sorted input: a new child comes last
        children.push_back({c, static_cast<uint32_t>(nodes.size())});
        nodes.emplace_back();
      }
      at = nodes[at].children.back().second;
    }
    nodes[at].tokens.push_back(id);
  }
  // Lay out: node 0 the root; each node's children in one run, in the order they are reached.
  trie_.assign(1, TrieNode{0, 0, 0, 0, 0});
  std::vector<uint32_t> placed(nodes.size(), 0);  // building index -> trie index
  std::vector<uint32_t> queue{0};
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const uint32_t b = queue[q];
    const uint32_t t = placed[b];
    trie_[t].tokens_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.insert(trie_tokens_.end(), nodes[b].tokens.begin(), nodes[b].tokens.end());
    trie_[t].tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    trie_[t].first_child = static_cast<uint32_t>(trie_.size());
    trie_[t].child_count = static_cast<uint32_t>(nodes[b].children.size());
    for (auto [byte, child] : nodes[b].children) {
      placed[child] = static_cast<uint32_t>(trie_.size());
      trie_.push_back(TrieNode{byte, 0, 0, 0, 0});
      queue.push_back(child);
    }
  }
}

}  // namespace inferlab
