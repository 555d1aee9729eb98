// Paged KV cache: one pool of fixed-size blocks shared by every sequence (vLLM's PagedAttention layout).
// A sequence owns a block table; blocks are reference counted so a shared prompt prefix can be
// mapped into several sequences (prefix caching) and freed when the last user lets go. This is
// the host's bookkeeping; the numbers live in a backend's KVStorage (backend memory and layout).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <memory>

#include "inferlab/backend/backend.h"

namespace inferlab {

struct ModelConfig;
struct SequenceKV;

// K and V of every layer for one token: 2 * layers * kv_heads * head_dim elements. The one formula
// behind the cache's size, the scheduler's default capacity and `inferlab kv-size`.
std::size_t kv_bytes_per_token(int layers, int kv_heads, int head_dim, std::size_t bytes_per_element);
// The same for a model's shape, with the cache's fp32 elements unless told otherwise.
std::size_t kv_bytes_per_token(const ModelConfig& config, std::size_t bytes_per_element = sizeof(float));
// The bytes of one element of a KV dtype named as `inferlab kv-size --dtype` takes it: f32, bf16,
// f16 (and their other spellings), fp8 / int8 one byte; 0 for a name it does not know.
std::size_t kv_dtype_bytes(const std::string& dtype);

// KVType (backend.h): f32, or f16 for half the memory at the cost of rounding.
KVType parse_kv_type(const std::string& name);  // "f32" or "f16"; else an Error naming both
const char* kv_type_name(KVType type);

class KVCache {
 public:
  // capacity_tokens is rounded up to whole blocks; memory is allocated once, here, by the backend
  // whose attention reads it (a model's: Model::backend()).
  KVCache(const ModelConfig& config, std::size_t capacity_tokens, int block_size = 16, KVType type = KVType::F32,
          Backend& backend = default_cpu_backend());
  KVType type() const { return type_; }

  int block_size() const { return block_size_; }
  int num_blocks() const { return num_blocks_; }
  int free_blocks() const { return static_cast<int>(free_list_.size()); }
  int used_blocks() const { return num_blocks_ - free_blocks(); }
  std::size_t bytes() const;            // memory held by the pool
  std::size_t bytes_per_token() const;  // kv_bytes_per_token of this cache's shape

  std::optional<int> allocate();  // a block with refcount 1, or nullopt when the pool is exhausted
  void retain(int block);         // one more user of this block
  void release(int block);        // one user fewer; at 0 the block returns to the free list
  int refcount(int block) const { return refcount_[block]; }

  // Stores the K and V rows ([kv_heads][head_dim] each) of one position of seq in one layer; the
  // position must lie in seq's reserved blocks.
  void write(int layer, const SequenceKV& seq, int position, const float* key, const float* value);
  // K and V of positions 0..positions-1 of seq in one layer, copied contiguous:
  // [positions][kv_heads][head_dim] into each of keys and values.
  void gather(int layer, const SequenceKV& seq, int positions, float* keys, float* values) const;
  KVStorage& storage() { return *storage_; }

 private:
  int layers_, kv_heads_, head_dim_, block_size_, num_blocks_;
  KVType type_;
  std::unique_ptr<KVStorage> storage_;
  std::vector<int> refcount_;
  std::vector<int> free_list_;
};

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
