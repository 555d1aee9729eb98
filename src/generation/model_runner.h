// Runs one planned step through the model and turns its logits into tokens, as vLLM's model
// runner does: builds the batch (each chunk's tokens over its KV blocks), calls
// Model::forward_into into one output buffer reused by every step, then per chunk applies the
// grammar's mask and samples, or verifies a speculative draft; an embedding chunk's hidden
// states it pools instead. Streams and stops nothing: the
// output stage does that with what it returns. Engine thread only.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "generation/planner.h"
#include "inferlab/generation/request_stream.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/model/model.h"

namespace inferlab {

// What sampling one chunk gave: the tokens to emit in order, or an end found before any token.
struct SampledChunk {
  std::vector<SampledToken> tokens;
  int drafted = 0, accepted = 0;  // speculative: draft tokens proposed and kept
  struct Ending {
    FinishReason reason;
    std::string error;
    bool request_error = false;  // the request's grammar, not the server
  };
  std::optional<Ending> ending;
};

class ModelRunner {
 public:
  ModelRunner(Model& model, KVCache& cache);

  // The forward pass over every chunk of the plan (KV written, kv.length advanced); its logits
  // stay here for sample().
  void forward(const StepPlan& plan);
  // The tokens of plan.chunks[index] from its logits rows: the verified draft and one token of
  // its own, or one token sampled under the grammar's mask (which it then writes into the row).
  SampledChunk sample(const PlannedChunk& chunk, std::size_t index);
  // The embedding of plan.chunks[index] (an embedding sequence's whole input): its hidden states
  // pooled and normalized as the model's config says.
  std::vector<float> embedding(const PlannedChunk& chunk, std::size_t index) const;

 private:
  Model& model_;
  KVCache& cache_;
  std::size_t vocab_, hidden_;
  StepOutputs outputs_;                 // logits and hidden states, reused by every step
  std::vector<std::size_t> first_row_;  // per chunk of the last forward, its first logits or hidden row
};

}  // namespace inferlab
