#include "inferlab/tensor/kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/activations.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"

namespace inferlab {

void set_kernel_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  openblas_set_num_threads(threads);
  fast::set_threads(threads);
}

void linear(const float* x, int rows, const LinearWeight& layer, float* y) {
  linear(x, rows, layer.weight ? layer.weight->data() : nullptr, layer.packed.get(), layer.in, layer.out,
         layer.bias.empty() ? nullptr : layer.bias.data(), y);
}

void linear(const float* x, int rows, const float* w, const fast::PackedMatrix* packed, int in, int out, const float* bias,
            float* y) {
  if (rows <= 0) return;
  if (packed) return fast::matmul(x, rows, *packed, bias, y);
  if (bias)
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<std::size_t>(r) * out, bias, sizeof(float) * out);
  if (rows == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, bias ? 1.0f : 0.0f, y, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w, in, bias ? 1.0f : 0.0f, y, out);
  }
}

namespace {
// Row-wise ops go over the kernel pool once there are enough rows (a prompt) to pay for the
// hand-off; a decode step's single row stays on the calling thread.
template <typename Body>
void for_rows(int rows, Body&& body) {
  fast::ThreadPool& pool = fast::kernel_pool();
  if (rows < 8 || pool.size() == 1) return body(0, rows);
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) { body(static_cast<int>(begin), static_cast<int>(end)); });
}

// In double, over 8 independent partial sums: one running sum would wait on each add's latency.
double sum_of_squares(const float* x, int n) {
  double part[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  double sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}
}  // namespace

void rms_norm_to(const float* x, float* out, int rows, int n, const float* weight, float eps) {
  for_rows(rows, [&](int begin, int end) {
    for (int r = begin; r < end; ++r) {
      const float* row = x + static_cast<std::size_t>(r) * n;
      float* dst = out + static_cast<std::size_t>(r) * n;
      const float scale = 1.0f / std::sqrt(static_cast<float>(sum_of_squares(row, n) / n) + eps);
      for (int i = 0; i < n; ++i) dst[i] = row[i] * scale * weight[i];
    }
  });
}

void rms_norm(float* x, int rows, int n, const float* weight, float eps) { rms_norm_to(x, x, rows, n, weight, eps); }

void layer_norm_to(const float* x, float* out, int rows, int n, const float* weight, const float* bias, float eps) {
  for_rows(rows, [&](int begin, int end) {
  for (int r = begin; r < end; ++r) {
    const float* row = x + static_cast<std::size_t>(r) * n;
    float* dst = out + static_cast<std::size_t>(r) * n;
    double mean = 0;
    for (int i = 0; i < n; ++i) mean += row[i];
    mean /= n;
    double var = 0;
    for (int i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= n;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int i = 0; i < n; ++i) dst[i] = (row[i] - m) * inv * weight[i] + (bias ? bias[i] : 0.0f);
  }
  });
}

void layer_norm(float* x, int rows, int n, const float* weight, const float* bias, float eps) {
  layer_norm_to(x, x, rows, n, weight, bias, eps);
}

void gelu_tanh(float* x, std::size_t n) {
  const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

void gelu_erf(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] / std::sqrt(2.0f)));
}

void swiglu(const float* gate_up, float* out, int rows, int inter) {
  for_rows(rows, [&](int begin, int end) {
    for (int r = begin; r < end; ++r) {
      const float* gate = gate_up + static_cast<std::size_t>(r) * 2 * inter;
      fast::silu_mul(gate, gate + inter, out + static_cast<std::size_t>(r) * inter, static_cast<std::size_t>(inter));
    }
  });
}

void clamped_swiglu(const float* gate_up, float* out, int rows, int inter, float alpha, float limit) {
  for_rows(rows, [&](int begin, int end) {
    for (int r = begin; r < end; ++r) {
      const float* gate = gate_up + static_cast<std::size_t>(r) * 2 * inter;
      const float* up = gate + inter;
      float* o = out + static_cast<std::size_t>(r) * inter;
      for (int i = 0; i < inter; ++i) {
        const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
        o[i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
      }
    }
  });
}

void softmax(float* x, int n) {
  float max = *std::max_element(x, x + n);
  float sum = 0;
  for (int i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// The softmax of [x, sink] without its last entry: the sink takes its share of the mass.
static void softmax_with_sink(float* x, int n, float sink) {
  const float max = std::max(sink, *std::max_element(x, x + n));
  float sum = std::exp(sink - max);
  for (int i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void causal_attention(const float* q, int q_stride, int n, int start, const float* k, const float* v, int kv_stride,
                      int head_dim, float scale, float* out, int out_stride, std::vector<float>& scratch, int window,
                      const float* sink) {
  const int ctx = start + n;
  // Query rows in chunks so the score matrix stays small for long prompts.
  const int chunk = std::max(1, std::min(n, static_cast<int>((1u << 22) / std::max(ctx, 1))));
  scratch.resize(static_cast<std::size_t>(chunk) * ctx);
  for (int i0 = 0; i0 < n; i0 += chunk) {
    const int m = std::min(chunk, n - i0);
    const int visible = start + i0 + m;  // keys any row of this chunk can see
    float* s = scratch.data();
    if (m == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, visible, head_dim, scale, k, kv_stride, q + static_cast<std::size_t>(i0) * q_stride, 1,
                  0.0f, s, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, visible, head_dim, scale,
                  q + static_cast<std::size_t>(i0) * q_stride, q_stride, k, kv_stride, 0.0f, s, visible);
    for (int i = 0; i < m; ++i) {
      float* row = s + static_cast<std::size_t>(i) * visible;
      const int see = start + i0 + i + 1;
      const int first = window > 0 ? std::max(0, see - window) : 0;  // older keys are outside the window
      if (sink) softmax_with_sink(row + first, see - first, *sink);
      else softmax(row + first, see - first);
      std::fill(row, row + first, 0.0f);
      std::fill(row + see, row + visible, 0.0f);
    }
    float* o = out + static_cast<std::size_t>(i0) * out_stride;
    if (m == 1)
      cblas_sgemv(CblasRowMajor, CblasTrans, visible, head_dim, 1.0f, v, kv_stride, s, 1, 0.0f, o, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, head_dim, visible, 1.0f, s, visible, v, kv_stride, 0.0f, o,
                  out_stride);
  }
}

void rope_rotate_half(float* vec, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float a = vec[i], b = vec[i + half];
    vec[i] = a * cos[i] - b * sin[i];
    vec[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace inferlab
