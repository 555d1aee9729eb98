// The scheduler's KV block bookkeeping: reserving and releasing a sequence's blocks in the paged
// KVCache, and the prefix cache, which keeps full blocks of computed prompts (keyed by a hash of
// the block's tokens chained to its parent's) so a later sequence with the same prefix reuses
// them instead of computing them again. Cached blocks nobody else holds are evicted least recently
// used first when the pool runs dry. Engine thread only.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "inferlab/model/kv_cache.h"

namespace inferlab {

class KVPrefixManager {
 public:
  // prefix_caching false: nothing is matched or registered, blocks are only reserved and released.
  KVPrefixManager(KVCache& cache, bool prefix_caching);

  KVCache& cache() { return cache_; }
  int block_size() const { return cache_.block_size(); }
  int num_blocks() const { return cache_.num_blocks(); }
  int free_blocks() const { return cache_.free_blocks(); }
  int used_blocks() const { return cache_.used_blocks(); }

  // Room for `extra` more positions of kv; false (holding nothing new) when the pool has too few
  // free blocks. Evicts nothing: make_room() first where that is wanted.
  bool reserve(SequenceKV& kv, int extra) { return kv.reserve(cache_, extra); }
  // Gives back every block of kv and forgets which of them were registered.
  void release(SequenceKV& kv, std::vector<uint64_t>& block_hashes);

  // Appends to kv the cached blocks that hold the longest run of tokens' full blocks (always
  // leaving at least one token to compute: its logits give the next token), advancing kv.length
  // and recording their hashes. kv must be empty.
  void match_prefix(const std::vector<int32_t>& tokens, SequenceKV& kv, std::vector<uint64_t>& block_hashes);
  // Offers every full block of kv's computed positions not yet in block_hashes to the cache; a
  // block whose hash is cached already stays the sequence's own.
  void register_full_blocks(const std::vector<int32_t>& tokens, const SequenceKV& kv, std::vector<uint64_t>& block_hashes);
  // Evicts cached blocks only the prefix cache holds, least recently used first, until `blocks`
  // are free; false when that many cannot be freed.
  bool make_room(int blocks);
  // Blocks held by the prefix cache alone (reusable, evicted when needed).
  int cached_only_blocks() const;

 private:
  struct CachedBlock {
    int block;
    uint64_t parent;  // the hash of the block before it (0 for the first)
    std::vector<int32_t> tokens;
    uint64_t last_used;
  };

  KVCache& cache_;
  bool prefix_caching_;
  std::unordered_map<uint64_t, CachedBlock> prefix_cache_;
  uint64_t clock_ = 0;  // LRU stamp
};

}  // namespace inferlab
