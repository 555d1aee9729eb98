#include "model/graph/blocks.h"

#include <cmath>

#include "inferlab/util/error.h"

namespace inferlab {

void norm(ForwardStep& s, Norm kind, const Activations& x, const std::vector<float>& weight, const std::vector<float>& bias,
          Activations& out) {
  const float eps = static_cast<float>(s.config.norm_eps);
  if (kind == Norm::RMS) s.backend.rms_norm(x, weight, eps, out);
  else s.backend.layer_norm(x, weight, bias, eps, out);
}

void embed_tokens(ForwardStep& s, const TransformerWeights& w) {
  s.backend.embed(*w.embedding, s.tokens, s.x);
  if (w.position_embedding) {
    static_assert(sizeof(int) == sizeof(int32_t));
    const std::span<const int32_t> positions(reinterpret_cast<const int32_t*>(s.rows.position.data()), s.rows.position.size());
    s.backend.embed(*w.position_embedding, positions, s.x, /*add=*/true);
  }
}

void rope_table(ForwardStep& s, const TransformerWeights& w) {
  s.backend.rope_table(s.rows.position, w.inv_freq, w.rope_attention_factor, s.rope);
}

void attention(ForwardStep& s, int layer, const LayerWeights& L, const AttentionOptions& options) {
  const ModelConfig& c = s.config;
  const int hd = c.head_dim, q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  Backend& b = s.backend;
  b.linear(s.normed, L.qkv, s.qkv);
  if (!L.q_norm.empty()) {  // Qwen3: each head normalised on its own, before RoPE
    const float eps = static_cast<float>(c.norm_eps);
    b.head_rms_norm(s.qkv, 0, c.num_heads, hd, L.q_norm, eps);
    b.head_rms_norm(s.qkv, q_dim, c.num_kv_heads, hd, L.k_norm, eps);
  }
  if (options.rope) {
    b.rope(s.qkv, 0, c.num_heads, hd, s.rope);
    b.rope(s.qkv, q_dim, c.num_kv_heads, hd, s.rope);
  }
  b.kv_write(s.cache->storage(), layer, s.qkv, q_dim, q_dim + kv_dim, s.rows);
  AttentionShape shape{c.num_heads, c.num_kv_heads, hd, 1.0f / std::sqrt(static_cast<float>(hd)), options.window,
                       /*exact=*/L.qkv.weight->format() == "f32", options.causal, L.attention_sinks};
  b.attention(s.cache->storage(), layer, s.qkv, s.rows, shape, s.attn);
  b.linear(s.attn, L.out, s.proj);
}

void dense_mlp(ForwardStep& s, const LayerWeights& L, Activation activation) {
  Backend& b = s.backend;
  b.linear(s.normed, L.up, s.up);
  switch (activation) {
    case Activation::SwiGLU:
      b.swiglu(s.up, s.act);
      b.linear(s.act, L.down, s.proj);
      return;
    case Activation::GeluTanh: b.gelu_tanh(s.up); break;
    case Activation::GeluErf: b.gelu_erf(s.up); break;
  }
  b.linear(s.up, L.down, s.proj);
}

void moe_mlp(ForwardStep& s, const LayerWeights& L) {
  Backend& b = s.backend;
  b.linear(s.normed, L.router, s.router_logits);
  b.route_top_k(s.router_logits, L.experts_per_token, L.normalize_expert_weights, s.expert_choice);
  b.expert_swiglu(s.normed, L.experts, s.expert_choice, s.proj);
}

void output_logits(ForwardStep& s, const TransformerWeights& w, Norm kind) {
  // Only the rows whose outputs are wanted go through the final norm and the (large) lm_head.
  StepOutputs& out = *s.out;
  if (!s.hidden_rows.empty()) {
    s.backend.select_rows(s.x, s.hidden_rows, s.selected);
    norm(s, kind, s.selected, w.final_norm_weight, w.final_norm_bias, s.selected);
    s.backend.to_host(s.selected, out.hidden);
  } else {
    out.hidden.clear();
  }
  if (s.logit_rows.empty()) {
    out.logits.clear();
    return;
  }
  s.backend.select_rows(s.x, s.logit_rows, s.selected);
  norm(s, kind, s.selected, w.final_norm_weight, w.final_norm_bias, s.selected);
  s.backend.linear_to_host(s.selected, w.lm_head, out.logits);
}

void output_hidden_states(ForwardStep& s, const Activations& stream) {
  if (!s.logit_rows.empty())
    fail("{} is an encoder: it gives hidden states (embeddings), not logits", s.config.architecture);
  s.out->logits.clear();
  s.backend.select_rows(stream, s.hidden_rows, s.selected);
  s.backend.to_host(s.selected, s.out->hidden);
}

}  // namespace inferlab
