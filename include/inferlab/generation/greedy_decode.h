// Greedy generation on one sequence, with the KV cache (prompt once, then one position per step)
// or without it (the whole sequence recomputed every step, as use_cache=False does).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inferlab/generation/speculative_decoding.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"

namespace inferlab {

struct GenerateOptions {
  int max_new_tokens = 32;
  bool use_cache = true;
  std::optional<std::vector<int>> eos_token_ids;  // default: the model's (generation_config.json)
  bool ignore_eos = false;
  // Called with each step's logits row (vocab_size floats) before the token is chosen.
  std::function<void(std::span<const float> logits)> on_step_logits;
  std::function<void(int32_t token)> on_token;
  // Prompt-lookup drafts verified in one pass each (with the cache only); the tokens are the
  // same as without, the steps fewer when drafts are accepted.
  SpeculativeOptions speculative;
  KVType kv_type = KVType::F32;  // the cache's elements
};

struct GenerateResult {
  std::vector<int32_t> tokens;       // generated ids only
  std::vector<int> positions_fed;    // input positions given to forward() at each step
  std::string finish_reason;         // "stop" (an eos id) or "length"
  int forward_passes = 0;
  int drafted_tokens = 0;            // speculative: tokens proposed
  int accepted_tokens = 0;           // ... and kept
};

int32_t argmax(std::span<const float> logits);  // first maximum, as torch.argmax

GenerateResult generate_greedy(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options);

// Logits for every prompt position ([prompt.size()][vocab]) in one forward pass.
std::vector<float> prompt_logits(Model& model, std::span<const int32_t> prompt);

}  // namespace inferlab
