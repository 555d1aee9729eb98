#include "backend/cpu/cpu_kv_storage.h"

#include <algorithm>
#include <new>

#include "inferlab/util/error.h"

namespace inferlab::cpu {

CpuKVStorage::CpuKVStorage(const KVShape& shape)
    : shape_(shape), block_stride_(static_cast<std::size_t>(shape.block_size) * shape.kv_heads * shape.head_dim) {
  const std::size_t bytes = block_stride_ * shape.layers * static_cast<std::size_t>(shape.blocks) * kv_element_bytes(shape.type);
  try {
    keys_.assign(bytes + 64, std::byte{0});
    values_.assign(bytes + 64, std::byte{0});
  } catch (const std::bad_alloc&) {
    fail("KV cache of {} tokens needs {} bytes, which could not be allocated",
         static_cast<std::size_t>(shape.blocks) * shape.block_size, 2 * bytes);
  }
}

std::size_t CpuKVStorage::bytes() const {
  return 2 * block_stride_ * shape_.layers * static_cast<std::size_t>(shape_.blocks) * kv_element_bytes(shape_.type);
}

CpuKVStorage& cpu_kv(KVStorage& kv) {
  auto* cpu = dynamic_cast<CpuKVStorage*>(&kv);
  if (!cpu) fail("the CPU backend was given a KV cache held by another backend");
  return *cpu;
}

// Layout: [layer][block] so one layer's blocks are near each other; within a block, values
// [block_size][kv_heads][head_dim] and keys transposed, [kv_heads][head_dim][block_size].
std::size_t CpuKVStorage::block_offset(int layer, int block) const {
  return (static_cast<std::size_t>(layer) * shape_.blocks + block) * block_stride_;
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

void CpuKVStorage::write(int layer, BlockTable blocks, int position, const float* key, const float* value) {
  const int bs = shape_.block_size;
  const std::size_t kv_dim = static_cast<std::size_t>(shape_.kv_heads) * shape_.head_dim;
  const std::size_t block = block_offset(layer, blocks[position / bs]);
  const int p = position % bs;
  const std::size_t row = block + fast::value_offset(shape_.kv_heads, shape_.head_dim, 0, 0, p);
  if (shape_.type == KVType::F16)
    store_position(pool<uint16_t>(keys_) + block, pool<uint16_t>(values_) + row, key, value, kv_dim, bs, p);
  else
    store_position(pool<float>(keys_) + block, pool<float>(values_) + row, key, value, kv_dim, bs, p);
}

void CpuKVStorage::layer_blocks(int layer, BlockTable blocks, fast::KVBlocks& view) const {
  view.block_size = shape_.block_size;
  view.keys.clear();
  view.values.clear();
  view.keys_f16.clear();
  view.values_f16.clear();
  for (int block : blocks) {
    const std::size_t at = block_offset(layer, block);
    if (shape_.type == KVType::F16) {
      view.keys_f16.push_back(pool<uint16_t>(keys_) + at);
      view.values_f16.push_back(pool<uint16_t>(values_) + at);
    } else {
      view.keys.push_back(pool<float>(keys_) + at);
      view.values.push_back(pool<float>(values_) + at);
    }
  }
}

void CpuKVStorage::gather(int layer, BlockTable blocks, int positions, float* keys, float* values) const {
  const int bs = shape_.block_size;
  const std::size_t kv_dim = static_cast<std::size_t>(shape_.kv_heads) * shape_.head_dim;
  for (int b = 0; b * bs < positions; ++b) {
    const int count = std::min(bs, positions - b * bs);
    const std::size_t from = block_offset(layer, blocks[b]);
    float* key_rows = keys + b * block_stride_;
    float* value_rows = values + b * block_stride_;
    if (shape_.type == KVType::F16)
      load_positions(pool<uint16_t>(keys_) + from, pool<uint16_t>(values_) + from, key_rows, value_rows, kv_dim, bs, count);
    else
      load_positions(pool<float>(keys_) + from, pool<float>(values_) + from, key_rows, value_rows, kv_dim, bs, count);
  }
}

}  // namespace inferlab::cpu
