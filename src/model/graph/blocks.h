// The blocks every architecture's graph is made of (llama.cpp's llm_graph_context: build_norm,
// build_attn, build_ffn), over one forward step's state. Blocks call the backend, never a kernel:
// the same graph runs on any backend.
#pragma once
#include <span>
#include <vector>

#include "inferlab/backend/backend.h"
#include "inferlab/model/config.h"
#include "inferlab/model/kv_cache.h"
#include "model/transformer.h"

namespace inferlab {

// One forward step: the batch laid out as rows, its cache, the activations (kept from step to
// step so their memory is reused) and where the logits go.
struct ForwardStep {
  Backend& backend;
  const ModelConfig& config;
  // Filled by TransformerModel::forward_into before the graph runs.
  KVCache* cache = nullptr;
  std::vector<int32_t> tokens;   // per row
  StepRows rows;
  std::vector<int> logit_rows;   // rows whose logits are wanted, in order
  std::vector<int> hidden_rows;  // rows whose hidden states are wanted, in order
  StepOutputs* out = nullptr;

  // Activations: the residual stream and the scratch the blocks share.
  Activations x, normed, qkv, attn, proj, up, act, rope, selected;
  // Mixture of experts: the router's logits and the experts each row chose.
  Activations router_logits;
  ExpertChoice expert_choice;

  ForwardStep(Backend& b, const ModelConfig& c) : backend(b), config(c) {}
};

enum class Norm { RMS, Layer };

// out = norm(x) with this weight (and bias: LayerNorm).
void norm(ForwardStep& s, Norm kind, const Activations& x, const std::vector<float>& weight, const std::vector<float>& bias,
          Activations& out);

// s.x = the rows' token embeddings (plus their learned positions, when `positions` is given).
void embed_tokens(ForwardStep& s, const TransformerWeights& w);

// The RoPE cos / sin of every row's position, into s.rope (once per step; every layer reads it).
void rope_table(ForwardStep& s, const TransformerWeights& w);

struct AttentionOptions {
  bool rope = true;    // rotate q and k by s.rope
  int window = 0;      // > 0: sliding window of that many positions
  bool causal = true;  // false (encoders): every position of a sequence sees all of them
};

// Self-attention of s.normed for one layer, into s.proj: fused q|k|v projection, the per-head
// q/k norms when the layer has them, RoPE, the KV write, causal attention over the paged cache
// (GQA), the output projection.
void attention(ForwardStep& s, int layer, const LayerWeights& L, const AttentionOptions& options);

enum class Activation { SwiGLU, GeluTanh, GeluErf };

// The dense MLP of s.normed for one layer, into s.proj: up (fused gate|up for SwiGLU), the
// activation, down.
void dense_mlp(ForwardStep& s, const LayerWeights& L, Activation activation);

// The mixture-of-experts MLP of s.normed for one layer, into s.proj: the router's logits,
// softmax and top-k (renormalised when the layer says so), the chosen experts' SwiGLU outputs
// summed with those weights (grouped by expert in the backend).
void moe_mlp(ForwardStep& s, const LayerWeights& L);

// The final norm, then the output projection of the rows that want logits into s.out->logits,
// and the normed rows that want hidden states into s.out->hidden.
void output_logits(ForwardStep& s, const TransformerWeights& w, Norm kind);

// An encoder's output: the rows of `stream` (the last layer's output, already normed) that want
// hidden states, into s.out->hidden. Error when a row wants logits: there is no output layer.
void output_hidden_states(ForwardStep& s, const Activations& stream);

}  // namespace inferlab
