// Compute kernels the transformer blocks are made of. fp32 activations throughout.
// Every dense layer goes through linear(), so a faster kernel (bf16 GEMV, int8) is one swap.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace inferlab {

namespace fast {
class PackedMatrix;
}

// A dense layer y = x W^T + b with W stored [out][in] row-major (PyTorch nn.Linear layout).
struct LinearWeight {
  int in = 0, out = 0;
  std::shared_ptr<const std::vector<float>> weight;  // shared so a tied lm_head reuses the embedding
  std::vector<float> bias;                           // empty: no bias
  // Set instead of `weight` when the layer is kept in bf16 / int8 / q4 (src/tensor/fast).
  std::shared_ptr<const fast::PackedMatrix> packed;
};

// Threads the kernels may use (0: all cores).
void set_kernel_threads(int threads);

// x: [rows][in] -> y: [rows][out].
void linear(const float* x, int rows, const LinearWeight& layer, float* y);
// The same with the weights given apart: packed, else weight ([out][in] f32); bias may be null.
void linear(const float* x, int rows, const float* weight, const fast::PackedMatrix* packed, int in, int out,
            const float* bias, float* y);

// In place over rows of width n.
void rms_norm(float* x, int rows, int n, const float* weight, float eps);
void layer_norm(float* x, int rows, int n, const float* weight, const float* bias, float eps);
// out = norm(x) without touching x.
void rms_norm_to(const float* x, float* out, int rows, int n, const float* weight, float eps);
void layer_norm_to(const float* x, float* out, int rows, int n, const float* weight, const float* bias, float eps);

void gelu_tanh(float* x, std::size_t n);  // GPT-2's gelu_new
void gelu_erf(float* x, std::size_t n);
// gate_up: [rows][2*inter] as (gate | up); out: [rows][inter] = silu(gate) * up.
void swiglu(const float* gate_up, float* out, int rows, int inter);

void softmax(float* x, int n);

// Causal attention of n query rows at positions start..start+n-1 over ctx = start+n keys/values
// (contiguous [ctx][head_dim], row stride kv_stride). q rows have stride q_stride, out rows
// out_stride. Row i sees keys 0..start+i; with window > 0 only the last window of them
// (start+i-window+1..start+i, a sliding window). scratch is reused between calls. sink (gpt-oss):
// a logit in each row's softmax denominator that carries no value; null: none.
void causal_attention(const float* q, int q_stride, int n, int start, const float* k, const float* v, int kv_stride,
                      int head_dim, float scale, float* out, int out_stride, std::vector<float>& scratch,
                      int window = 0, const float* sink = nullptr);

// gate_up: [rows][2*inter] as (gate | up); out: [rows][inter] = (clamp(up, -limit, limit) + 1) *
// g * sigmoid(alpha * g), g = min(gate, limit) (gpt-oss's experts).
void clamped_swiglu(const float* gate_up, float* out, int rows, int inter, float alpha, float limit);

// Rotary embedding, HF rotate_half convention: pairs (i, i + d/2). cos/sin: [d/2].
void rope_rotate_half(float* vec, int head_dim, const float* cos, const float* sin);

}  // namespace inferlab
