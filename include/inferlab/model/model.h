// A loaded transformer (a causal language model, or an encoder that only gives hidden states):
// config + weights + one batched forward step over a paged KV cache.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inferlab/model/config.h"
#include "inferlab/model/kv_cache.h"

namespace inferlab {

struct LoadOptions {
  int threads = 0;  // 0: all cores
  // Matmul weights: "auto" keeps the checkpoint's dtype (bf16 stays bf16, f32/f16 run as f32);
  // "f32", "bf16", "int8" (q8_0-like), "q4" (q4_0-like) convert or quantize at load.
  std::string weights = "auto";
  // The output projection (lm_head, or the embedding when tied): "auto" is int8 when weights is q4
  // (as llama-quantize's Q4 mixes keep it at 8 bits), else the same as weights; or a format name.
  std::string output_weights = "auto";
};

// The format the output projection is packed in under these options (output_weights resolved).
std::string output_weights_of(const LoadOptions& options);

// What one batch entry wants back from a forward step.
enum class EntryOutput {
  last_logits,    // the logits of its last token (generation)
  all_logits,     // the logits of every token (draft verification, parity tests)
  hidden_states,  // every token's last hidden state (what an embedding is pooled from)
};

// One sequence's part of a batched forward step: `tokens` are appended at kv->length.
struct BatchEntry {
  std::span<const int32_t> tokens;
  SequenceKV* kv = nullptr;
  EntryOutput output = EntryOutput::last_logits;
};

// A step's outputs, row-major and in batch order: the logits rows of the entries that want
// logits, and the hidden-state rows of those that want hidden states. A caller that steps again
// passes the same object: its memory is reused, where a fresh one per step (5 MB for 8 rows of a
// 152k vocabulary) was allocated and zeroed each time.
struct StepOutputs {
  std::vector<float> logits;  // [logits rows][vocab_size]
  std::vector<float> hidden;  // [hidden rows][hidden_size]: after the final norm, before any output projection
};

class Model {
 public:
  virtual ~Model() = default;

  // A folder (HF layout or llama2.c .bin) or an HF repo id resolved through resolve_model_path().
  static std::unique_ptr<Model> load(const std::string& model, const LoadOptions& options = {});

  virtual const ModelConfig& config() const = 0;
  virtual const std::filesystem::path& path() const = 0;
  // The backend that holds this model's weights and runs its forward pass; a KV cache for this
  // model is made by it (KVCache's last argument).
  virtual Backend& backend() = 0;

  // Runs every entry through the network in one step (weights read once for the whole batch).
  // The caller has reserved KV room for each entry's tokens; kv->length advances by tokens.size().
  // Fills `out` (resized) with the rows each entry asked for, in batch order. Error for hidden
  // states of a model without them, or logits of a model without an output layer (an encoder).
  virtual void forward_into(std::span<const BatchEntry> batch, KVCache& cache, StepOutputs& out) = 0;
  // The logits alone, into `logits` (its memory reused as above).
  void forward_into(std::span<const BatchEntry> batch, KVCache& cache, std::vector<float>& logits) {
    StepOutputs out;
    out.logits.swap(logits);
    forward_into(batch, cache, out);
    logits.swap(out.logits);
  }
  // The same, returning a new vector.
  std::vector<float> forward(std::span<const BatchEntry> batch, KVCache& cache) {
    std::vector<float> logits;
    forward_into(batch, cache, logits);
    return logits;
  }

  // Bytes of weights one decode step reads from memory: every layer's matmuls and the output
  // projection as held (packed bytes, scales included; f32 at 4 bytes). What bounds decode speed,
  // so decode's share of the memory bandwidth is tokens/s x this / the measured bandwidth.
  virtual std::size_t decode_weight_bytes() const = 0;
  // Those bytes by the format they are held in, largest share first: "q6_k 55 %, q4_k 44 %, f32 1 %"
  // (a GGUF mix as it runs; a fused matrix of mixed formats counts each part in its own).
  virtual std::string weight_formats() const = 0;
};

}  // namespace inferlab
