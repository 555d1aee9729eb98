#include "inferlab/model/kv_cache.h"

#include <algorithm>
#include <cctype>

#include "inferlab/util/error.h"
#include "inferlab/model/config.h"
#include "inferlab/loading/safetensors.h"

namespace inferlab {

KVType parse_kv_type(const std::string& name) {
  if (name == "f32") return KVType::F32;
  if (name == "f16") return KVType::F16;
  fail("KV cache type '{}' is not one of f32, f16", name);
}

const char* kv_type_name(KVType type) { return type == KVType::F16 ? "f16" : "f32"; }

KVCache::KVCache(const ModelConfig& config, std::size_t capacity_tokens, int block_size, KVType type, Backend& backend)
    : layers_(config.num_layers),
      kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      block_size_(block_size),
      type_(type) {
  if (block_size <= 0) fail("KV cache block size must be positive, got {}", block_size);
  if (layers_ <= 0 || kv_heads_ <= 0 || head_dim_ <= 0)
    fail("KV cache needs layers, kv heads and head_dim > 0 (got {}, {}, {})", layers_, kv_heads_, head_dim_);
  std::size_t blocks = (capacity_tokens + block_size - 1) / block_size;
  if (blocks == 0) blocks = 1;
  if (blocks > static_cast<std::size_t>(INT32_MAX)) fail("KV cache capacity too large: {} tokens", capacity_tokens);
  num_blocks_ = static_cast<int>(blocks);
  storage_ = backend.kv_storage({layers_, kv_heads_, head_dim_, block_size_, num_blocks_, type_});
  refcount_.assign(num_blocks_, 0);
  free_list_.reserve(num_blocks_);
  // Hand out low block numbers first: pop_back takes from the end.
  for (int b = num_blocks_ - 1; b >= 0; --b) free_list_.push_back(b);
}

std::size_t KVCache::bytes() const { return storage_->bytes(); }

std::size_t kv_bytes_per_token(int layers, int kv_heads, int head_dim, std::size_t bytes_per_element) {
  return 2 * static_cast<std::size_t>(layers) * kv_heads * head_dim * bytes_per_element;
}

std::size_t kv_dtype_bytes(const std::string& dtype) {
  std::string name = dtype;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name == "fp8" || name == "int8" || name == "i8" || name == "f8") return 1;
  if (auto d = parse_dtype(name)) return dtype_size(*d);
  return 0;
}

std::size_t kv_bytes_per_token(const ModelConfig& config, std::size_t bytes_per_element) {
  return kv_bytes_per_token(config.num_layers, config.num_kv_heads, config.head_dim, bytes_per_element);
}

std::size_t KVCache::bytes_per_token() const {
  return kv_bytes_per_token(layers_, kv_heads_, head_dim_, kv_element_bytes(type_));
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

void KVCache::write(int layer, const SequenceKV& seq, int position, const float* key, const float* value) {
  storage_->write(layer, seq.blocks, position, key, value);
}

void KVCache::gather(int layer, const SequenceKV& seq, int positions, float* keys, float* values) const {
  storage_->gather(layer, seq.blocks, positions, keys, values);
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
