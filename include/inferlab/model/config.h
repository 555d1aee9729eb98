// The architecture-independent description of a model: what the forward pass, the KV cache and
// the scheduler need to know, read from config.json (or a llama2.c header) by the architecture.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace inferlab {

// How an embedding is made of a sequence's last hidden states (sentence-transformers' Pooling and
// Normalize modules): their mean, the first token's ([CLS]) or the last token's; then scaled to
// unit length, or not.
struct EmbeddingPooling {
  enum class Kind { mean, cls, last };
  Kind kind = Kind::last;
  bool normalize = true;
};
const char* to_string(EmbeddingPooling::Kind kind);

struct ModelConfig {
  std::string architecture;  // "gpt2", "qwen2", "qwen3", "llama", "mistral", "bert"
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;  // context length
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  int sliding_window = 0;  // > 0 (Mistral): a position attends to the last sliding_window positions, itself included
  // Per layer (Qwen2/Qwen3 use_sliding_window): that layer's window as above, 0 for full attention;
  // empty: every layer has sliding_window.
  std::vector<int> layer_windows;
  // An encoder (BERT): every position attends to every position of its sequence, and there is no
  // output layer: it gives hidden states (embeddings), never logits.
  bool encoder = false;
  // The folder's sentence-transformers modules when it has them; else mean for an encoder, the
  // last token for a decoder (as vLLM pools them), normalized.
  EmbeddingPooling pooling;
  int max_seq_length = 0;  // sentence-transformers' limit on an embedding's input (0: the context)
  std::vector<int> eos_token_ids;    // from generation_config.json (int or list), else config.json
  std::optional<int> bos_token_id;
};

// The longest input an embedding may have: max_seq_length when set, else the context.
int max_input_tokens(const ModelConfig& config);

// A model folder (or its config.json, or a llama2.c .bin) -> its config, weights not read.
// eos ids come from generation_config.json when present.
ModelConfig read_model_config(const std::string& model);

}  // namespace inferlab
