#include "generation/kv_prefix_manager.h"

#include <algorithm>

namespace inferlab {

namespace {

// FNV-1a over the parent's hash and the block's token ids: the key of one full KV block.
uint64_t block_hash(uint64_t parent, const int32_t* tokens, int count) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(&parent, sizeof parent);
  mix(tokens, sizeof(int32_t) * count);
  return h;
}

}  // namespace

KVPrefixManager::KVPrefixManager(KVCache& cache, bool prefix_caching) : cache_(cache), prefix_caching_(prefix_caching) {}

void KVPrefixManager::release(SequenceKV& kv, std::vector<uint64_t>& block_hashes) {
  kv.release(cache_);
  block_hashes.clear();
}

bool KVPrefixManager::make_room(int blocks) {
  while (cache_.free_blocks() < blocks) {
    auto victim = prefix_cache_.end();
    for (auto it = prefix_cache_.begin(); it != prefix_cache_.end(); ++it)
      if (cache_.refcount(it->second.block) == 1 &&
          (victim == prefix_cache_.end() || it->second.last_used < victim->second.last_used))
        victim = it;
    if (victim == prefix_cache_.end()) return false;
    cache_.release(victim->second.block);
    prefix_cache_.erase(victim);
  }
  return true;
}

void KVPrefixManager::match_prefix(const std::vector<int32_t>& tokens, SequenceKV& kv,
                                   std::vector<uint64_t>& block_hashes) {
  if (!prefix_caching_) return;
  const int bs = cache_.block_size();
  // Leave at least one token to compute: its logits give the first generated token.
  const int matchable = (static_cast<int>(tokens.size()) - 1) / bs;
  uint64_t parent = 0;
  for (int i = 0; i < matchable; ++i) {
    const int32_t* block_tokens = tokens.data() + static_cast<std::size_t>(i) * bs;
    uint64_t h = block_hash(parent, block_tokens, bs);
    auto it = prefix_cache_.find(h);
    if (it == prefix_cache_.end() || it->second.parent != parent ||
        !std::equal(it->second.tokens.begin(), it->second.tokens.end(), block_tokens))
      break;
    it->second.last_used = ++clock_;
    cache_.retain(it->second.block);
    kv.blocks.push_back(it->second.block);
    kv.length += bs;
    block_hashes.push_back(h);
    parent = h;
  }
}

void KVPrefixManager::register_full_blocks(const std::vector<int32_t>& tokens, const SequenceKV& kv,
                                           std::vector<uint64_t>& block_hashes) {
  if (!prefix_caching_) return;
  const int bs = cache_.block_size();
  const std::size_t full = static_cast<std::size_t>(kv.length / bs);
  while (block_hashes.size() < full) {
    const std::size_t i = block_hashes.size();
    const int32_t* block_tokens = tokens.data() + i * bs;
    uint64_t parent = i ? block_hashes[i - 1] : 0;
    uint64_t h = block_hash(parent, block_tokens, bs);
    auto [it, inserted] = prefix_cache_.try_emplace(h);
    if (inserted) {
      it->second = CachedBlock{kv.blocks[i], parent, std::vector<int32_t>(block_tokens, block_tokens + bs), ++clock_};
      cache_.retain(kv.blocks[i]);
    }
    block_hashes.push_back(h);
  }
}

int KVPrefixManager::cached_only_blocks() const {
  int cached_only = 0;
  for (const auto& [hash, entry] : prefix_cache_)
    if (cache_.refcount(entry.block) == 1) ++cached_only;
  return cached_only;
}

}  // namespace inferlab
