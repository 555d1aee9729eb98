// Paged KV cache: one pool of fixed-size blocks shared by every sequence (vLLM's PagedAttention layout).
// A sequence owns a block table; blocks are reference counted so a shared prompt prefix can be
// mapped into several sequences (prefix caching) and freed when the last user lets go.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace inferlab {

struct ModelConfig;

class KVCache {
 public:
  // capacity_tokens is rounded up to whole blocks; memory is allocated once, here.
  KVCache(const ModelConfig& config, std::size_t capacity_tokens, int block_size = 16);

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int free_blocks() const { return static_cast<int>(free_list_.size()); }
  int used_blocks() const { return num_blocks_ - free_blocks(); }
  std::size_t bytes() const;            // memory held by the pool
  std::size_t bytes_per_token() const;  // 2 * layers * kv_heads * head_dim * sizeof(element)

  std::optional<int> allocate();  // a block with refcount 1, or nullopt when the pool is exhausted
  void retain(int block);         // one more user of this block
  void release(int block);        // one user fewer; at 0 the block returns to the free list
  int refcount(int block) const { return refcount_[block]; }

  // K and V rows of one block of one layer: [block_size][kv_heads][head_dim], contiguous.
  float* keys(int layer, int block);
  float* values(int layer, int block);
  const float* keys(int layer, int block) const;
  const float* values(int layer, int block) const;

 private:
  int layers_, kv_heads_, head_dim_, block_size_, num_blocks_;
  std::size_t block_stride_;  // floats per (layer, block) for K or for V
  std::vector<float> keys_, values_;
  std::vector<int> refcount_;
  std::vector<int> free_list_;
};

// One sequence's view of the cache: its blocks in order and how many positions hold K/V.
struct SequenceKV {
  std::vector<int> blocks;
  int length = 0;

  // Make room for `extra` more positions, allocating blocks as needed; false (and nothing held
  // beyond what was there) when the pool cannot supply them.
  bool reserve(KVCache& cache, int extra);
  // Give every block back (release once each) and reset to empty.
  void release(KVCache& cache);
};

}  // namespace inferlab
