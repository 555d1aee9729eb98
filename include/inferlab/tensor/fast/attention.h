// Causal attention over the paged KV cache, fused: scores, an online (streaming) softmax and the
// weighted sum of values in one pass per block of cached positions, never materialising the
// score row. Threaded over (row, kv head); each kv head's query group shares its K/V loads (GQA).
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace inferlab::fast {

// One layer's K/V of one sequence as plain memory, block by block in position order: block i
// holds positions i * block_size.. as [block_size][kv_heads][head_dim] floats. The kernels only
// read it; the model layer's KVCache::layer_blocks fills it (reusing the vectors' storage).
struct KVBlocks {
  std::vector<const float*> keys, values;
  int block_size = 0;
};

struct AttentionRow {
  const KVBlocks* kv = nullptr;
  int position = 0;  // this row attends to cached positions first..position
  int first = 0;     // > 0 with a sliding window (Mistral): older positions are masked out
};

struct AttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
};

// q: row r, head h at q[r * q_stride + h * head_dim]; out likewise with out_stride.
// K/V of position j of a row: kv->keys/values[j / block_size] + (j % block_size) * kv_heads *
// head_dim + kv_head * head_dim.
void causal_attention(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                      std::span<const AttentionRow> rows, const AttentionShape& shape);

// The same with plain loops and an exact two-pass softmax in double precision (test oracle).
void causal_attention_reference(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                                std::span<const AttentionRow> rows, const AttentionShape& shape);

}  // namespace inferlab::fast
