#include "inferlab/model/kv_cache.h"

#include "inferlab/util/error.h"
#include "inferlab/model/model.h"

namespace inferlab {

KVCache::KVCache(const ModelConfig& config, std::size_t capacity_tokens, int block_size)
    : layers_(config.num_layers),
      kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      block_size_(block_size) {
  if (block_size <= 0) fail("KV cache block size must be positive, got {}", block_size);
  if (layers_ <= 0 || kv_heads_ <= 0 || head_dim_ <= 0)
    fail("KV cache needs layers, kv heads and head_dim > 0 (got {}, {}, {})", layers_, kv_heads_, head_dim_);
  std::size_t blocks = (capacity_tokens + block_size - 1) / block_size;
  if (blocks == 0) blocks = 1;
  if (blocks > static_cast<std::size_t>(INT32_MAX)) fail("KV cache capacity too large: {} tokens", capacity_tokens);
  num_blocks_ = static_cast<int>(blocks);
  block_stride_ = static_cast<std::size_t>(block_size_) * kv_heads_ * head_dim_;
  const std::size_t floats = block_stride_ * layers_ * blocks;
  try {
    keys_.assign(floats, 0.0f);
    values_.assign(floats, 0.0f);
  } catch (const std::bad_alloc&) {
    fail("KV cache of {} tokens needs {} bytes, which could not be allocated", capacity_tokens,
         2 * floats * sizeof(float));
  }
  refcount_.assign(num_blocks_, 0);
  free_list_.reserve(num_blocks_);
  // Hand out low block numbers first: pop_back takes from the end.
  for (int b = num_blocks_ - 1; b >= 0; --b) free_list_.push_back(b);
}

std::size_t KVCache::bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

std::size_t KVCache::bytes_per_token() const {
  return 2 * static_cast<std::size_t>(layers_) * kv_heads_ * head_dim_ * sizeof(float);
}

std::optional<int> KVCache::allocate() {
  if (free_list_.empty()) return std::nullopt;
  int block = free_list_.back();
  free_list_.pop_back();
  refcount_[block] = 1;
  return block;
}

void KVCache::retain(int block) {
  if (block < 0 || block >= num_blocks_ || refcount_[block] <= 0)
    fail("KV cache: retain of block {} which is not allocated", block);
  ++refcount_[block];
}

void KVCache::release(int block) {
  if (block < 0 || block >= num_blocks_ || refcount_[block] <= 0)
    fail("KV cache: release of block {} which is not allocated", block);
  if (--refcount_[block] == 0) free_list_.push_back(block);
}

// Layout: [layer][block][block_size][kv_heads][head_dim] so one layer's blocks are near each other.
float* KVCache::keys(int layer, int block) {
  return keys_.data() + (static_cast<std::size_t>(layer) * num_blocks_ + block) * block_stride_;
}
float* KVCache::values(int layer, int block) {
  return values_.data() + (static_cast<std::size_t>(layer) * num_blocks_ + block) * block_stride_;
}
const float* KVCache::keys(int layer, int block) const {
  return keys_.data() + (static_cast<std::size_t>(layer) * num_blocks_ + block) * block_stride_;
}
const float* KVCache::values(int layer, int block) const {
  return values_.data() + (static_cast<std::size_t>(layer) * num_blocks_ + block) * block_stride_;
}

bool SequenceKV::reserve(KVCache& cache, int extra) {
  if (extra < 0) fail("SequenceKV::reserve: negative extra {}", extra);
  const long needed_positions = static_cast<long>(length) + extra;
  const long needed_blocks = (needed_positions + cache.block_size() - 1) / cache.block_size();
  const std::size_t had = blocks.size();
  while (static_cast<long>(blocks.size()) < needed_blocks) {
    std::optional<int> block = cache.allocate();
    if (!block) {
      while (blocks.size() > had) {
        cache.release(blocks.back());
        blocks.pop_back();
      }
      return false;
    }
    blocks.push_back(*block);
  }
  return true;
}

void SequenceKV::release(KVCache& cache) {
  for (int block : blocks) cache.release(block);
  blocks.clear();
  length = 0;
}

}  // namespace inferlab
