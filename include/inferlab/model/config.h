// The architecture-independent description of a model: what the forward pass, the KV cache and
// the scheduler need to know, read from config.json (or a llama2.c header) by the architecture.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace inferlab {

struct ModelConfig {
  std::string architecture;  // "gpt2", "qwen2", "qwen3", "llama", "mistral"
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
  std::vector<int> eos_token_ids;    // from generation_config.json (int or list), else config.json
  std::optional<int> bos_token_id;
};

// A model folder (or its config.json, or a llama2.c .bin) -> its config, weights not read.
// eos ids come from generation_config.json when present.
ModelConfig read_model_config(const std::string& model);

}  // namespace inferlab
