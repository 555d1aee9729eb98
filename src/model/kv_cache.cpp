#include "inferlab/model/kv_cache.h"

#include <algorithm>

#include "inferlab/util/error.h"
#include "inferlab/model/config.h"

namespace inferlab {

KVType parse_kv_type(const std::string& name) {
  if (name == "f32") return KVType::F32;
  if (name == "f16") return KVType::F16;
  fail("KV cache type '{}' is not one of f32, f16", name);
}

const char* kv_type_name(KVType type) { return type == KVType::F16 ? "f16" : "f32"; }

std::size_t kv_element_bytes(KVType type) { return type == KVType::F16 ? sizeof(uint16_t) : sizeof(float); }

KVCache::KVCache(const ModelConfig& config, std::size_t capacity_tokens, int block_size, KVType type)
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
  block_stride_ = static_cast<std::size_t>(block_size_) * kv_heads_ * head_dim_;
  const std::size_t bytes = block_stride_ * layers_ * blocks * kv_element_bytes(type_);
  try {
    keys_.assign(bytes + 64, std::byte{0});
    values_.assign(bytes + 64, std::byte{0});
  } catch (const std::bad_alloc&) {
    fail("KV cache of {} tokens needs {} bytes, which could not be allocated", capacity_tokens, 2 * bytes);
  }
  refcount_.assign(num_blocks_, 0);
  free_list_.reserve(num_blocks_);
  // Hand out low block numbers first: pop_back takes from the end.
  for (int b = num_blocks_ - 1; b >= 0; --b) free_list_.push_back(b);
}

std::size_t KVCache::bytes() const {
  return 2 * block_stride_ * layers_ * static_cast<std::size_t>(num_blocks_) * kv_element_bytes(type_);
}

std::size_t kv_bytes_per_token(int layers, int kv_heads, int head_dim, std::size_t bytes_per_element) {
  return 2 * static_cast<std::size_t>(layers) * kv_heads * head_dim * bytes_per_element;
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

// Layout: [layer][block] so one layer's blocks are near each other; within a block, values
// [block_size][kv_heads][head_dim] and keys transposed, [kv_heads][head_dim][block_size]
// (fast::KVBlocks).
std::size_t KVCache::block_offset(int layer, int block) const {
  return (static_cast<std::size_t>(layer) * num_blocks_ + block) * block_stride_;
}

namespace {

// One position's key and value rows (kv_dim floats each) into a block of E elements: the value
// row as it is, the keys transposed (fast::KVBlocks: element i of the row goes to row i, column p).
template <typename E>
void store_position(E* block_keys, E* value_row, const float* key, const float* value, std::size_t kv_dim, int bs, int p) {
  for (std::size_t i = 0; i < kv_dim; ++i) value_row[i] = fast::kv_from_f32<E>(value[i]);
  for (std::size_t i = 0; i < kv_dim; ++i) block_keys[i * bs + p] = fast::kv_from_f32<E>(key[i]);
}

// The first `count` positions of a block back as f32 rows, the keys transposed back.
template <typename E>
void load_positions(const E* block_keys, const E* block_values, float* key_rows, float* value_rows, std::size_t kv_dim,
                    int bs, int count) {
  for (std::size_t i = 0; i < count * kv_dim; ++i) value_rows[i] = fast::kv_to_f32(block_values[i]);
  for (int p = 0; p < count; ++p)
    for (std::size_t i = 0; i < kv_dim; ++i) key_rows[p * kv_dim + i] = fast::kv_to_f32(block_keys[i * bs + p]);
}

}  // namespace

void KVCache::write(int layer, const SequenceKV& seq, int position, const float* key, const float* value) {
  const std::size_t kv_dim = static_cast<std::size_t>(kv_heads_) * head_dim_;
  const std::size_t block = block_offset(layer, seq.blocks[position / block_size_]);
  const int p = position % block_size_;
  const std::size_t row = block + fast::value_offset(kv_heads_, head_dim_, 0, 0, p);
  if (type_ == KVType::F16)
    store_position(pool<uint16_t>(keys_) + block, pool<uint16_t>(values_) + row, key, value, kv_dim, block_size_, p);
  else
    store_position(pool<float>(keys_) + block, pool<float>(values_) + row, key, value, kv_dim, block_size_, p);
}

void KVCache::layer_blocks(int layer, const SequenceKV& seq, fast::KVBlocks& view) const {
  view.block_size = block_size_;
  view.keys.clear();
  view.values.clear();
  view.keys_f16.clear();
  view.values_f16.clear();
  for (int block : seq.blocks) {
    const std::size_t at = block_offset(layer, block);
    if (type_ == KVType::F16) {
      view.keys_f16.push_back(pool<uint16_t>(keys_) + at);
      view.values_f16.push_back(pool<uint16_t>(values_) + at);
    } else {
      view.keys.push_back(pool<float>(keys_) + at);
      view.values.push_back(pool<float>(values_) + at);
    }
  }
}

void KVCache::gather(int layer, const SequenceKV& seq, int positions, float* keys, float* values) const {
  const std::size_t kv_dim = static_cast<std::size_t>(kv_heads_) * head_dim_;
  for (int b = 0; b * block_size_ < positions; ++b) {
    const int count = std::min(block_size_, positions - b * block_size_);
    const std::size_t from = block_offset(layer, seq.blocks[b]);
    float* key_rows = keys + b * block_stride_;
    float* value_rows = values + b * block_stride_;
    if (type_ == KVType::F16)
      load_positions(pool<uint16_t>(keys_) + from, pool<uint16_t>(values_) + from, key_rows, value_rows, kv_dim, block_size_, count);
    else
      load_positions(pool<float>(keys_) + from, pool<float>(values_) + from, key_rows, value_rows, kv_dim, block_size_, count);
  }
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
