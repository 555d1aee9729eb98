#include "inferlab/grammar/token_vocabulary.h"

#include <algorithm>

namespace inferlab {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  std::vector<int32_t>& sorted = trie_tokens_;
  byte_token_bits_.assign((bytes_.size() + 63) / 64, 0);
  for (int32_t id = 0; id < static_cast<int32_t>(bytes_.size()); ++id)
    if (!bytes_[id].empty()) {
      sorted.push_back(id);
      byte_token_bits_[id >> 6] |= uint64_t{1} << (id & 63);
    }
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b); });
  for (int32_t id : sorted) {
    max_bytes_ = std::max(max_bytes_, bytes_[id].size());
    const auto chars = std::count_if(bytes_[id].begin(), bytes_[id].end(), [](char c) { return !utf8_decoder::continues(static_cast<uint8_t>(c)); });
    trie_token_chars_.push_back(static_cast<uint16_t>(std::min<std::ptrdiff_t>(chars, UINT16_MAX)));
  }

  // Tokens sorted by bytes meet the trie in depth-first order: a token's new nodes (past its common
  // prefix with the token before) come after every node made so far. Built in that order first,
  // then laid out with each node's children together.
  const uint32_t count = static_cast<uint32_t>(sorted.size());
  std::vector<TrieNode> depth_first(1);
  std::vector<uint32_t> parent{0};
  std::vector<uint32_t> path{0};  // the node of each prefix of the last token
  auto close_below = [&](std::size_t keep, uint32_t tokens_done) {
    for (; path.size() > keep; path.pop_back()) depth_first[path.back()].subtree_tokens_end = tokens_done;
  };
  for (uint32_t k = 0; k < count; ++k) {
    const std::string& s = bytes_[sorted[k]];
    std::size_t common = 0;
    if (k > 0) {
      const std::string& last = bytes_[sorted[k - 1]];
      while (common < s.size() && common < last.size() && s[common] == last[common]) ++common;
    }
    close_below(common + 1, k);
    for (std::size_t j = common; j < s.size(); ++j) {
      TrieNode n;
      n.byte = static_cast<uint8_t>(s[j]);
      n.tokens_begin = n.tokens_end = k;
      parent.push_back(path.back());
      path.push_back(static_cast<uint32_t>(depth_first.size()));
      depth_first.push_back(n);
    }
    depth_first[path.back()].tokens_end = k + 1;  // equal bytes are neighbours, before any longer token
  }
  close_below(0, count);

  // What lies below each node, children first (they come after their parent).
  std::vector<uint8_t> utf8_from(depth_first.size(), 0xFF);  // bit u: valid UTF-8 below, read from decoder state u
  std::vector<uint32_t> child_count(depth_first.size(), 0);
  for (std::size_t c = depth_first.size() - 1; c > 0; --c) {
    const TrieNode& child = depth_first[c];
    TrieNode& up = depth_first[parent[c]];
    ++child_count[parent[c]];
    up.ascii_below[0] |= child.ascii_below[0];
    up.ascii_below[1] |= child.ascii_below[1];
    if (child.byte < 0x80) up.ascii_below[child.byte >> 6] |= uint64_t{1} << (child.byte & 63);
    up.only_ascii_below = up.only_ascii_below && child.only_ascii_below && child.byte < 0x80;
    const int chars = child.chars_below + (utf8_decoder::continues(child.byte) ? 0 : 1);
    up.chars_below = static_cast<uint8_t>(std::max<int>(up.chars_below, std::min(chars, 255)));
    uint8_t valid = 0;
    for (int u = 0; u < utf8_decoder::kStates; ++u) {
      const int to = utf8_decoder::step(u, child.byte);
      if (to >= 0 && ((utf8_from[c] >> to) & 1)) valid |= static_cast<uint8_t>(1u << u);
    }
    utf8_from[parent[c]] &= valid;
  }
  for (std::size_t i = 0; i < depth_first.size(); ++i) depth_first[i].utf8_below = utf8_from[i];

  // Breadth first: children (in depth-first order, so by byte) get consecutive places.
  std::vector<uint32_t> children_begin(depth_first.size() + 1, 0);
  for (std::size_t i = 0; i < depth_first.size(); ++i) children_begin[i + 1] = children_begin[i] + child_count[i];
  std::vector<uint32_t> children(depth_first.size() > 0 ? depth_first.size() - 1 : 0);
  {
    std::vector<uint32_t> fill(children_begin.begin(), children_begin.end() - 1);
    for (std::size_t c = 1; c < depth_first.size(); ++c) children[fill[parent[c]]++] = static_cast<uint32_t>(c);
  }
  trie_.assign(1, depth_first[0]);
  std::vector<uint32_t> queue{0};  // depth-first index of trie_[q]
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const uint32_t d = queue[q];
    trie_[q].first_child = static_cast<uint32_t>(trie_.size());
    trie_[q].child_count = child_count[d];
    for (uint32_t j = children_begin[d]; j < children_begin[d + 1]; ++j) {
      queue.push_back(children[j]);
      trie_.push_back(depth_first[children[j]]);
    }
  }
}

}  // namespace inferlab
