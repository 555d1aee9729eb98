// The CPU backend: the Backend operations over src/tensor's kernels. The matmul dispatches to
// AMX, AVX-512 or AVX2 by the machine (INFERLAB_ISA forces one); attention over packed models is
// the fused kernel on the paged cache, f32 models keep the exact two-pass path their parity tests pin.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_kv_storage.h"
#include "backend/cpu/cpu_weights.h"
#include "inferlab/backend/backend.h"
#include "inferlab/tensor/fast/attention.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/kernels.h"
#include "inferlab/util/error.h"

namespace inferlab {
namespace cpu {
namespace {

const float* data_of(std::span<const float> v) { return v.empty() ? nullptr : v.data(); }

float* row(const Activations& a, int r) { return a.data + static_cast<std::size_t>(r) * a.cols; }

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return std::string("cpu (") + fast::isa_name(fast::active_isa()) + ")"; }

  MatrixPtr matrix(const TensorView& view, int rows, int cols, const std::string& format, bool transposed) override {
    return load_matrix(view, rows, cols, format, transposed);
  }
  MatrixPtr concat_rows(std::span<const MatrixPtr> parts) override { return cpu::concat_rows(parts); }
  void check_format(const std::string& format) const override { fast::parse_format(format); }
  bool is_4bit(const std::string& format) const override { return fast::parse_format(format) == fast::WeightFormat::Q4; }

  void resize(Activations& a, int rows, int cols) override {
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    if (n > a.capacity) {
      auto floats = std::make_shared<std::vector<float>>(n);
      a.data = floats->data();
      a.capacity = n;
      a.storage = std::move(floats);
    }
    a.rows = rows;
    a.cols = cols;
  }

  void embed(const Matrix& table, std::span<const int32_t> ids, Activations& out, bool add) override {
    const CpuMatrix& m = cpu_matrix(table);
    const int cols = m.cols();
    if (!add) resize(out, static_cast<int>(ids.size()), cols);
    std::vector<float> scratch(add ? cols : 0);
    for (std::size_t r = 0; r < ids.size(); ++r) {
      float* to = add ? scratch.data() : row(out, static_cast<int>(r));
      if (m.packed()) m.packed()->dequantize_row(ids[r], to);
      else std::memcpy(to, m.f32()->data() + static_cast<std::size_t>(ids[r]) * cols, sizeof(float) * cols);
      if (add)
        for (int i = 0; i < cols; ++i) row(out, static_cast<int>(r))[i] += scratch[i];
    }
  }

  void linear(const Activations& x, const Linear& layer, Activations& y) override {
    resize(y, x.rows, layer.out);
    run_linear(x, layer, y.data);
  }

  void linear_to_host(const Activations& x, const Linear& layer, std::vector<float>& host) override {
    host.resize(static_cast<std::size_t>(x.rows) * layer.out);  // every element written
    run_linear(x, layer, host.data());
  }

  void to_host(const Activations& x, std::vector<float>& host) override {
    host.assign(x.data, x.data + static_cast<std::size_t>(x.rows) * x.cols);
  }

  void rms_norm(const Activations& x, std::span<const float> weight, float eps, Activations& out) override {
    if (&out != &x) resize(out, x.rows, x.cols);
    rms_norm_to(x.data, out.data, x.rows, x.cols, weight.data(), eps);
  }
  void layer_norm(const Activations& x, std::span<const float> weight, std::span<const float> bias, float eps,
                  Activations& out) override {
    if (&out != &x) resize(out, x.rows, x.cols);
    layer_norm_to(x.data, out.data, x.rows, x.cols, weight.data(), data_of(bias), eps);
  }
  void head_rms_norm(Activations& x, int offset, int heads, int head_dim, std::span<const float> weight, float eps) override {
    for (int r = 0; r < x.rows; ++r) {
      float* heads_of_row = row(x, r) + offset;
      rms_norm_to(heads_of_row, heads_of_row, heads, head_dim, weight.data(), eps);
    }
  }

  void rope_table(std::span<const int> positions, std::span<const float> inv_freq, float scale, Activations& table) override {
    const int half = static_cast<int>(inv_freq.size());
    resize(table, static_cast<int>(positions.size()), 2 * half);  // cos | sin
    for (std::size_t r = 0; r < positions.size(); ++r)
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[r]) * inv_freq[i];
        row(table, static_cast<int>(r))[i] = std::cos(angle) * scale;
        row(table, static_cast<int>(r))[half + i] = std::sin(angle) * scale;
      }
  }
  void rope(Activations& x, int offset, int heads, int head_dim, const Activations& table) override {
    const int half = table.cols / 2;
    for (int r = 0; r < x.rows; ++r) {
      const float* cs = row(table, r);
      float* first = row(x, r) + offset;
      for (int h = 0; h < heads; ++h) rope_rotate_half(first + h * head_dim, head_dim, cs, cs + half);
    }
  }

  void add(Activations& x, const Activations& y) override {
    const std::size_t n = static_cast<std::size_t>(x.rows) * x.cols;
    for (std::size_t i = 0; i < n; ++i) x.data[i] += y.data[i];
  }
  void gelu_tanh(Activations& x) override { inferlab::gelu_tanh(x.data, static_cast<std::size_t>(x.rows) * x.cols); }
  void gelu_erf(Activations& x) override { inferlab::gelu_erf(x.data, static_cast<std::size_t>(x.rows) * x.cols); }
  void swiglu(const Activations& gate_up, Activations& out) override {
    resize(out, gate_up.rows, gate_up.cols / 2);
    inferlab::swiglu(gate_up.data, out.data, gate_up.rows, gate_up.cols / 2);
  }
  void select_rows(const Activations& x, std::span<const int> rows, Activations& out) override {
    resize(out, static_cast<int>(rows.size()), x.cols);
    for (std::size_t i = 0; i < rows.size(); ++i) std::memcpy(row(out, static_cast<int>(i)), row(x, rows[i]), sizeof(float) * x.cols);
  }

  std::unique_ptr<KVStorage> kv_storage(const KVShape& shape) override { return std::make_unique<CpuKVStorage>(shape); }

  void kv_write(KVStorage& kv, int layer, const Activations& qkv, int k_offset, int v_offset, const StepRows& rows) override {
    for (int r = 0; r < rows.count(); ++r)
      kv.write(layer, rows.sequences[rows.entry[r]], rows.position[r], row(qkv, r) + k_offset, row(qkv, r) + v_offset);
  }

  void attention(KVStorage& kv, int layer, const Activations& qkv, const StepRows& rows, const AttentionShape& shape,
                 Activations& out) override {
    const int q_dim = shape.heads * shape.head_dim;
    resize(out, rows.count(), q_dim);
    // The gathered path is causal only; a bidirectional step takes the fused kernel, whose rows
    // may end at any position.
    if (shape.exact && shape.causal) return gathered_attention(kv, layer, qkv, rows, shape, out);
    // One pass over each sequence's cache blocks per (row, kv head): scores, online softmax and
    // the weighted values fused (src/tensor/fast/attention.cpp), threaded on the kernel pool.
    CpuKVStorage& storage = cpu_kv(kv);
    std::vector<fast::KVBlocks>& kv_views_ = scratch().kv_views;
    std::vector<fast::AttentionRow>& attention_rows_ = scratch().attention_rows;
    kv_views_.resize(rows.sequences.size());  // refilled in place: no allocation once grown
    for (std::size_t e = 0; e < rows.sequences.size(); ++e) storage.layer_blocks(layer, rows.sequences[e], kv_views_[e]);
    attention_rows_.resize(rows.count());
    for (int r = 0; r < rows.count(); ++r) {
      const int last = shape.causal ? rows.position[r] : rows.position[rows.first_row[rows.entry[r] + 1] - 1];
      attention_rows_[r] = {&kv_views_[rows.entry[r]], last,
                            shape.window > 0 ? std::max(0, rows.position[r] - shape.window + 1) : 0};
    }
    check_sinks(shape);
    fast::causal_attention(qkv.data, qkv.cols, out.data, q_dim, attention_rows_,
                           {shape.heads, shape.kv_heads, shape.head_dim, shape.scale, data_of(shape.sinks)});
  }

  void route_top_k(const Activations& router_logits, int k, bool normalize, ExpertChoice& choice) override {
    const int experts = router_logits.cols;
    if (k < 1 || k > experts) fail("route_top_k: {} experts per row asked of {} experts", k, experts);
    choice.per_row = k;
    choice.expert.resize(static_cast<std::size_t>(router_logits.rows) * k);
    choice.weight.resize(choice.expert.size());
    std::vector<float>& probs = scratch().router_probs;
    std::vector<int>& order = scratch().router_order;
    probs.resize(experts);
    order.resize(experts);
    for (int r = 0; r < router_logits.rows; ++r) {
      const float* logits = row(router_logits, r);
      float largest = logits[0];
      for (int e = 1; e < experts; ++e) largest = std::max(largest, logits[e]);
      float sum = 0;
      for (int e = 0; e < experts; ++e) sum += probs[e] = std::exp(logits[e] - largest);
      for (int e = 0; e < experts; ++e) probs[e] /= sum;
      for (int e = 0; e < experts; ++e) order[e] = e;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int a, int b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
      float chosen_sum = 0;
      for (int j = 0; j < k; ++j) chosen_sum += probs[order[j]];
      for (int j = 0; j < k; ++j) {
        choice.expert[static_cast<std::size_t>(r) * k + j] = order[j];
        choice.weight[static_cast<std::size_t>(r) * k + j] = normalize ? probs[order[j]] / chosen_sum : probs[order[j]];
      }
    }
  }

  // The (row, slot) pairs sorted by expert (a counting sort), then per chosen expert: its rows
  // gathered, one gate|up matmul, SwiGLU, one down matmul, each result added into its row times its
  // weight. Experts are taken in index order, so a row's sum has the same order on every path.
  void expert_swiglu(const Activations& x, std::span<const ExpertWeights> experts, const ExpertChoice& choice,
                     Activations& out) override {
    const int rows = x.rows, hidden = x.cols, k = choice.per_row, count = static_cast<int>(experts.size());
    if (choice.rows() != rows || choice.weight.size() != choice.expert.size())
      fail("expert_swiglu: a choice of {} rows for {} rows of input", choice.rows(), rows);
    resize(out, rows, hidden);
    std::fill(out.data, out.data + static_cast<std::size_t>(rows) * hidden, 0.0f);
    Scratch& s = scratch();
    s.expert_start.assign(count + 1, 0);
    for (int e : choice.expert) {
      if (e < 0 || e >= count) fail("expert_swiglu: expert {} chosen of {} experts", e, count);
      ++s.expert_start[e + 1];
    }
    for (int e = 0; e < count; ++e) s.expert_start[e + 1] += s.expert_start[e];
    s.expert_fill.assign(s.expert_start.begin(), s.expert_start.end() - 1);
    s.expert_slots.resize(choice.expert.size());
    for (std::size_t slot = 0; slot < choice.expert.size(); ++slot) s.expert_slots[s.expert_fill[choice.expert[slot]]++] = static_cast<int>(slot);
    for (int e = 0; e < count; ++e) {
      const int first = s.expert_start[e], n = s.expert_start[e + 1] - first;
      if (n == 0) continue;
      const ExpertWeights& expert = experts[e];
      if (expert.gate_up.in != hidden || expert.down.out != hidden || expert.gate_up.out != 2 * expert.down.in)
        fail("expert_swiglu: expert {} has gate|up [{}][{}] and down [{}][{}] for a width of {}", e, expert.gate_up.out,
             expert.gate_up.in, expert.down.out, expert.down.in, hidden);
      const int inter = expert.down.in;
      s.expert_in.resize(static_cast<std::size_t>(n) * hidden);
      for (int i = 0; i < n; ++i)
        std::memcpy(s.expert_in.data() + static_cast<std::size_t>(i) * hidden, row(x, s.expert_slots[first + i] / k),
                    sizeof(float) * hidden);
      s.expert_gate_up.resize(static_cast<std::size_t>(n) * 2 * inter);
      s.expert_act.resize(static_cast<std::size_t>(n) * inter);
      s.expert_out.resize(static_cast<std::size_t>(n) * hidden);
      run_linear(s.expert_in.data(), n, expert.gate_up, s.expert_gate_up.data());
      switch (expert.activation.kind) {
        case ExpertActivation::Kind::SiLU: inferlab::swiglu(s.expert_gate_up.data(), s.expert_act.data(), n, inter); break;
        case ExpertActivation::Kind::ClampedSwiGLU:
          inferlab::clamped_swiglu(s.expert_gate_up.data(), s.expert_act.data(), n, inter, expert.activation.alpha,
                                   expert.activation.limit);
          break;
      }
      run_linear(s.expert_act.data(), n, expert.down, s.expert_out.data());
      for (int i = 0; i < n; ++i) {
        const int slot = s.expert_slots[first + i];
        const float weight = choice.weight[slot];
        const float* from = s.expert_out.data() + static_cast<std::size_t>(i) * hidden;
        float* to = row(out, slot / k);
        for (int c = 0; c < hidden; ++c) to[c] += weight * from[c];
      }
    }
  }

 private:
  static void run_linear(const Activations& x, const Linear& layer, float* y) { run_linear(x.data, x.rows, layer, y); }
  static void run_linear(const float* x, int rows, const Linear& layer, float* y) {
    const CpuMatrix& m = cpu_matrix(*layer.weight);
    inferlab::linear(x, rows, m.f32() ? m.f32()->data() : nullptr, m.packed(), layer.in, layer.out,
                     layer.bias.empty() ? nullptr : layer.bias.data(), y);
  }

  static void check_sinks(const AttentionShape& shape) {
    if (!shape.sinks.empty() && static_cast<int>(shape.sinks.size()) != shape.heads)
      fail("attention: {} sinks for {} heads", shape.sinks.size(), shape.heads);
  }

  // Causal attention per sequence and kv head: its cached K/V gathered contiguous, then two
  // matrix products per query head (rows at position p see positions 0..p).
  void gathered_attention(KVStorage& kv, int layer, const Activations& qkv, const StepRows& rows, const AttentionShape& shape,
                          Activations& out) {
    const int hd = shape.head_dim, q_dim = shape.heads * hd, kv_dim = shape.kv_heads * hd;
    const int group = shape.heads / shape.kv_heads;
    check_sinks(shape);
    std::vector<float>&gathered_k_ = scratch().gathered_k, &gathered_v_ = scratch().gathered_v, &scores_ = scratch().scores;
    for (std::size_t e = 0; e < rows.sequences.size(); ++e) {
      const int first_row = rows.first_row[e], n = rows.first_row[e + 1] - first_row;
      const int start = rows.position[first_row], ctx = start + n;
      gathered_k_.resize(static_cast<std::size_t>(ctx) * kv_dim);
      gathered_v_.resize(gathered_k_.size());
      kv.gather(layer, rows.sequences[e], ctx, gathered_k_.data(), gathered_v_.data());
      for (int h = 0; h < shape.heads; ++h) {
        const int kvh = h / group;
        causal_attention(row(qkv, first_row) + h * hd, qkv.cols, n, start, gathered_k_.data() + kvh * hd,
                         gathered_v_.data() + kvh * hd, kv_dim, hd, shape.scale, row(out, first_row) + h * hd, q_dim,
                         scores_, shape.window, shape.sinks.empty() ? nullptr : &shape.sinks[h]);
      }
    }
  }

  // Attention's scratch, reused across layers and steps: one per calling thread, so two threads
  // may run forward passes at once (a test's reference decode beside a scheduler).
  struct Scratch {
    std::vector<fast::KVBlocks> kv_views;
    std::vector<fast::AttentionRow> attention_rows;
    std::vector<float> gathered_k, gathered_v, scores;
    // mixture of experts: router probabilities, and the rows grouped by expert with their buffers
    std::vector<float> router_probs;
    std::vector<int> router_order, expert_start, expert_fill, expert_slots;
    std::vector<float> expert_in, expert_gate_up, expert_act, expert_out;
  };
  static Scratch& scratch() {
    thread_local Scratch per_thread;
    return per_thread;
  }
};

}  // namespace
}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  set_kernel_threads(threads);
  return std::make_unique<cpu::CpuBackend>();
}

Backend& default_cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

}  // namespace inferlab
