// The backend seam: every operation the model graphs run on weights, activations or the KV cache.
// A graph (src/model/arch/*.cpp) holds the handles below and calls these operations; only a
// backend reads the bytes behind them. The CPU backend (src/backend/cpu/) runs today's kernels
// (AMX / AVX-512 / AVX2 / scalar, chosen at run time); a device backend implements the same class
// over its own memory. docs/architecture.md lists what adding one takes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inferlab/loading/safetensors.h"

namespace inferlab {

// A weight matrix [rows][cols] (nn.Linear's [out][in]) as the backend holds it: packed bf16 /
// int8 / 4-bit / ggml-block panels or f32 rows on the CPU.
class Matrix {
 public:
  virtual ~Matrix() = default;
  virtual int rows() const = 0;
  virtual int cols() const = 0;
  // "f32", "bf16", "int8", "q4", a ggml type, or "mixed" (parts of several formats).
  virtual std::string format() const = 0;
  // Bytes held, added into by_format under each part's format (a fused matrix counts its parts).
  virtual void add_bytes_by_format(std::map<std::string, std::size_t>& by_format) const = 0;
};
using MatrixPtr = std::shared_ptr<const Matrix>;

// A dense layer y = x W^T + b. Small parameters (biases here, norm weights, RoPE frequencies:
// well under 1 % of a model's bytes) stay host arrays that the operations take as spans; a device
// backend keeps its own copy of each, made once (they do not change while the model lives).
struct Linear {
  MatrixPtr weight;
  std::vector<float> bias;  // [out]; empty: no bias
  int in = 0, out = 0;
};

// Activation memory the backend allocated: host memory on the CPU, device memory on a GPU. A
// graph passes it to the operations and never reads `data` itself. Row-major [rows][cols].
struct Activations {
  float* data = nullptr;
  int rows = 0, cols = 0;
  std::size_t capacity = 0;       // floats allocated; resize() reallocates only to grow
  std::shared_ptr<void> storage;  // owns data
};

// What a cache stores K and V in: f32, or f16 (IEEE half, rounded to nearest even as they are
// written; llama.cpp's default) for half the memory and half the bytes a decode step at a long
// context reads, at the cost of that rounding.
enum class KVType { F32, F16 };
std::size_t kv_element_bytes(KVType type);

// A sequence's KV blocks in position order: block i holds positions i * block_size ...
using BlockTable = std::span<const int>;

// K and V of every layer in fixed-size blocks, in the backend's memory and layout. Which block
// belongs to which sequence is the host's bookkeeping (KVCache); storage only holds the numbers.
class KVStorage {
 public:
  virtual ~KVStorage() = default;
  virtual std::size_t bytes() const = 0;
  // One position's K and V rows ([kv_heads][head_dim] each, host floats) of a sequence in one layer.
  virtual void write(int layer, BlockTable blocks, int position, const float* key, const float* value) = 0;
  // K and V of positions 0..positions-1 of a sequence in one layer, as host f32 rows
  // [positions][kv_heads][head_dim] into each of keys and values.
  virtual void gather(int layer, BlockTable blocks, int positions, float* keys, float* values) const = 0;
};

struct KVShape {
  int layers = 0, kv_heads = 0, head_dim = 0, block_size = 0, blocks = 0;
  KVType type = KVType::F32;
};

// One attention call's shape: query heads share kv heads in groups (GQA).
struct AttentionShape {
  int heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  int window = 0;      // > 0: a position sees only the last `window` positions, itself included
  // f32 models: the gathered two-pass attention the exact-parity tests pin, not the fused kernel.
  bool exact = false;
  // false (encoders): each row sees every position of its sequence this step writes, not only
  // those up to its own. The step holds the whole sequence (the planner never splits an encoder's).
  bool causal = true;
  // Per query head (gpt-oss's attention sinks): a logit that joins each row's softmax denominator,
  // taking probability mass while adding no value. Empty: none.
  std::span<const float> sinks;
};

// The rows of one forward step: the batch's sequences, and for each row its sequence and position.
struct StepRows {
  std::vector<BlockTable> sequences;         // each sequence's blocks, in batch order
  std::vector<int> first_row;                // per sequence: its first row; one more: the row count
  std::vector<int> entry;                    // per row: its sequence's index in `sequences`
  std::vector<int> position;                 // per row: its position in that sequence
  int count() const { return static_cast<int>(entry.size()); }
};

// How an expert combines its gate and up halves. SiLU (Qwen3-MoE): silu(gate) * up. ClampedSwiGLU
// (gpt-oss): gate clamped to at most limit, up to [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate).
struct ExpertActivation {
  enum class Kind { SiLU, ClampedSwiGLU };
  Kind kind = Kind::SiLU;
  float alpha = 0, limit = 0;  // ClampedSwiGLU only
};

// One expert of a mixture-of-experts feed-forward: a gated MLP.
struct ExpertWeights {
  Linear gate_up;  // fused [gate | up] rows: [2 * inter][hidden]; its bias (gpt-oss) is added before the activation
  Linear down;     // [hidden][inter], bias optional
  ExpertActivation activation;
};

// Each row's chosen experts and their weights, [rows][per_row] row-major. Host memory, like
// StepRows: the routing decides which experts' weights a step reads, and that is the host's plan.
struct ExpertChoice {
  int per_row = 0;
  std::vector<int> expert;
  std::vector<float> weight;
  int rows() const { return per_row > 0 ? static_cast<int>(expert.size()) / per_row : 0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu (avx512)"

  // ---- weights ----------------------------------------------------------------------------
  // format: LoadOptions::weights ("auto" keeps a checkpoint's dtype, a GGUF's blocks; or
  // "f32", "bf16", "int8", "q4"). view: [rows][cols]; transposed: the view is [cols][rows]
  // (GPT-2's Conv1D), turned here. Shapes are the caller's to check.
  virtual MatrixPtr matrix(const TensorView& view, int rows, int cols, const std::string& format,
                           bool transposed = false) = 0;
  // Row-wise concatenation of matrices of the same width (fused q|k|v, gate|up), formats kept.
  virtual MatrixPtr concat_rows(std::span<const MatrixPtr> parts) = 0;
  // A format name as LoadOptions spells it; an Error naming the known ones otherwise.
  virtual void check_format(const std::string& format) const = 0;
  // Whether the format is a 4-bit one (its output projection is then kept at 8 bits).
  virtual bool is_4bit(const std::string& format) const = 0;

  // ---- activations ------------------------------------------------------------------------
  virtual void resize(Activations& a, int rows, int cols) = 0;

  // ---- operations (x, out: activations; weights: handles; small parameters: host spans) -----
  // out[r] = table row ids[r] (add: out[r] += it, for learned position embeddings).
  virtual void embed(const Matrix& table, std::span<const int32_t> ids, Activations& out, bool add = false) = 0;
  virtual void linear(const Activations& x, const Linear& layer, Activations& y) = 0;
  // The output projection of x straight into host memory: logits [x.rows][layer.out].
  virtual void linear_to_host(const Activations& x, const Linear& layer, std::vector<float>& host) = 0;
  // x copied into host memory [x.rows][x.cols].
  virtual void to_host(const Activations& x, std::vector<float>& host) = 0;
  virtual void rms_norm(const Activations& x, std::span<const float> weight, float eps, Activations& out) = 0;
  virtual void layer_norm(const Activations& x, std::span<const float> weight, std::span<const float> bias, float eps,
                          Activations& out) = 0;
  // In place: RMSNorm of each head_dim slice of columns [offset, offset + heads * head_dim).
  virtual void head_rms_norm(Activations& x, int offset, int heads, int head_dim, std::span<const float> weight,
                             float eps) = 0;
  // cos / sin of each row's position times inv_freq, times scale (YaRN's attention factor; else 1),
  // for rope(): computed once per step.
  virtual void rope_table(std::span<const int> positions, std::span<const float> inv_freq, float scale,
                          Activations& table) = 0;
  // In place, HF rotate_half convention, heads of head_dim at columns [offset, ...).
  virtual void rope(Activations& x, int offset, int heads, int head_dim, const Activations& table) = 0;
  virtual void add(Activations& x, const Activations& y) = 0;  // x += y
  virtual void gelu_tanh(Activations& x) = 0;
  virtual void gelu_erf(Activations& x) = 0;
  // gate_up [rows][2 * inter] as (gate | up) -> out [rows][inter] = silu(gate) * up.
  virtual void swiglu(const Activations& gate_up, Activations& out) = 0;
  // out row i = x row rows[i].
  virtual void select_rows(const Activations& x, std::span<const int> rows, Activations& out) = 0;

  // ---- KV cache and attention -------------------------------------------------------------
  virtual std::unique_ptr<KVStorage> kv_storage(const KVShape& shape) = 0;
  // qkv [rows][q | k | v]: each row's k and v (at columns k_offset, v_offset) into the cache.
  virtual void kv_write(KVStorage& kv, int layer, const Activations& qkv, int k_offset, int v_offset,
                        const StepRows& rows) = 0;
  // Attention of each row's query (columns 0.., heads * head_dim) over its sequence's cached
  // positions up to its own (causal) or up to its sequence's last row -> out [rows][heads * head_dim].
  virtual void attention(KVStorage& kv, int layer, const Activations& qkv, const StepRows& rows,
                         const AttentionShape& shape, Activations& out) = 0;

  // ---- mixture of experts -----------------------------------------------------------------
  // Each row of router logits [rows][experts]: softmax, the k largest probabilities (the lower
  // expert first on a tie), divided by their sum when `normalize` -> choice.
  virtual void route_top_k(const Activations& router_logits, int k, bool normalize, ExpertChoice& choice) = 0;
  // out [rows][hidden] = for each row, the sum over its chosen experts of weight * expert(x row),
  // expert(x) = down(activation(gate_up(x))) with each Linear's bias when it has one.
  // Grouped by expert: each chosen expert's weights are read once for all the rows that chose it,
  // and an expert no row chose is not read at all.
  virtual void expert_swiglu(const Activations& x, std::span<const ExpertWeights> experts, const ExpertChoice& choice,
                             Activations& out) = 0;
};

// The CPU backend with `threads` kernel threads (0: all cores).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);
// The process's CPU backend with the kernel threads as last set (KV caches built without a model).
Backend& default_cpu_backend();

}  // namespace inferlab
