// The CPU backend's KV storage: one host pool per K and V, [layer][block], in the layout the fused
// attention kernel reads (fast::KVBlocks: values as rows, keys transposed within a block).
#pragma once
#include <cstddef>
#include <vector>

#include "inferlab/backend/backend.h"
#include "inferlab/tensor/fast/attention.h"

namespace inferlab::cpu {

class CpuKVStorage final : public KVStorage {
 public:
  explicit CpuKVStorage(const KVShape& shape);
  std::size_t bytes() const override;
  void write(int layer, BlockTable blocks, int position, const float* key, const float* value) override;
  void gather(int layer, BlockTable blocks, int positions, float* keys, float* values) const override;
  // One layer's blocks of a sequence as the attention kernels' plain view; refills `view` in place so a
  // view reused across layers and steps allocates nothing once its vectors have grown.
  void layer_blocks(int layer, BlockTable blocks, fast::KVBlocks& view) const;

 private:
  // Offset of one (layer, block) in keys_ / values_, in elements.
  std::size_t block_offset(int layer, int block) const;
  template <typename E>
  E* pool(std::vector<std::byte>& bytes) const { return reinterpret_cast<E*>(bytes.data()); }
  template <typename E>
  const E* pool(const std::vector<std::byte>& bytes) const { return reinterpret_cast<const E*>(bytes.data()); }

  KVShape shape_;
  std::size_t block_stride_;  // elements per (layer, block) for K or for V
  // Element type each, and 64 bytes beyond the last block: the AVX2 kernel's f16 loads of a
  // block's last key row read up to 14 bytes past it (attention.cpp).
  std::vector<std::byte> keys_, values_;
};

// A KVStorage of another backend given to this one is a programming error, named here.
CpuKVStorage& cpu_kv(KVStorage& kv);

}  // namespace inferlab::cpu
