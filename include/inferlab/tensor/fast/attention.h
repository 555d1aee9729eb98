// Causal attention over the paged KV cache, fused: scores, an online (streaming) softmax and the
// weighted sum of values in one pass per block of cached positions, never materialising the
// score row. Threaded over (row, kv head, part of 512 positions), the parts of a long row merged
// at the end; each kv head's query group shares its K/V loads (GQA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/tensor/float16.h"

namespace inferlab::fast {

// One layer's K/V of one sequence as plain memory, block by block in position order: block i
// holds positions i * block_size.. . Values are [block_size][kv_heads][head_dim] floats; keys are
// stored transposed, [kv_heads][head_dim][block_size]: one dimension of consecutive positions is
// one vector, so a head's scores for 16 positions are one FMA per dimension, with no reduction
// across lanes. The kernels only read it; the CPU backend's CpuKVStorage::layer_blocks fills it
// (reusing the vectors' storage).
// A cache of f16 elements (IEEE half bits) fills keys_f16 / values_f16 instead, in the same
// layout; the kernels widen them to f32 as they load them.
struct KVBlocks {
  std::vector<const float*> keys, values;
  std::vector<const uint16_t*> keys_f16, values_f16;
  int block_size = 0;

  bool f16() const { return !keys_f16.empty(); }
  std::size_t blocks() const { return f16() ? keys_f16.size() : keys.size(); }
};

// A cache element as f32, and an f32 value as a cache element (f16: IEEE half bits, rounded to
// nearest even).
inline float kv_to_f32(float x) { return x; }
inline float kv_to_f32(uint16_t x) { return f16_to_f32(x); }
template <typename E>
E kv_from_f32(float x);
template <>
inline float kv_from_f32<float>(float x) { return x; }
template <>
inline uint16_t kv_from_f32<uint16_t>(float x) { return f32_to_f16(x); }

// Offsets within a block of position p (p % block_size): element d of kv head h.
inline std::size_t key_offset(int block_size, int head_dim, int h, int d, int p) {
  return (static_cast<std::size_t>(h) * head_dim + d) * block_size + p;
}
inline std::size_t value_offset(int kv_heads, int head_dim, int h, int d, int p) {
  return (static_cast<std::size_t>(p) * kv_heads + h) * head_dim + d;
}

struct AttentionRow {
  const KVBlocks* kv = nullptr;
  int position = 0;  // this row attends to cached positions first..position
  int first = 0;     // > 0 with a sliding window (Mistral): older positions are masked out
};

struct AttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  // [heads] (gpt-oss): a logit per query head that joins each row's softmax denominator and adds
  // no value. Null: none.
  const float* sinks = nullptr;
};

// q: row r, head h at q[r * q_stride + h * head_dim]; out likewise with out_stride.
// K/V of position j of a row: in block kv->keys/values[j / block_size], at key_offset /
// value_offset of j % block_size.
void causal_attention(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                      std::span<const AttentionRow> rows, const AttentionShape& shape);

// The same with plain loops and an exact two-pass softmax in double precision (test oracle).
void causal_attention_reference(const float* q, std::size_t q_stride, float* out, std::size_t out_stride,
                                std::span<const AttentionRow> rows, const AttentionShape& shape);

}  // namespace inferlab::fast
