#include "inferlab/generation/greedy_decode.h"

#include <algorithm>

#include "inferlab/tensor/fast/argmax.h"
#include "inferlab/util/error.h"

namespace inferlab {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) fail("argmax: no logits");
  return static_cast<int32_t>(fast::argmax(logits.data(), logits.size()));
}

namespace {

// A cache with room for exactly one sequence of `tokens` positions.
KVCache cache_for(Model& model, std::size_t tokens, KVType type = KVType::F32) {
  return KVCache(model.config(), tokens, 16, type, model.backend());
}

}  // namespace

GenerateResult generate_greedy(Model& model, std::span<const int32_t> prompt, const GenerateOptions& options) {
  if (prompt.empty()) fail("generate: the prompt is empty (give at least one token id)");
  if (options.max_new_tokens < 0) fail("generate: max_new_tokens must be >= 0, got {}", options.max_new_tokens);
  const ModelConfig& config = model.config();
  const std::vector<int> eos = options.ignore_eos ? std::vector<int>{}
                                                  : options.eos_token_ids.value_or(config.eos_token_ids);
  const std::size_t total = prompt.size() + options.max_new_tokens;
  if (config.max_position_embeddings > 0 && total > static_cast<std::size_t>(config.max_position_embeddings))
    fail("generate: prompt of {} tokens + {} new tokens exceeds the model's context of {} positions", prompt.size(),
         options.max_new_tokens, config.max_position_embeddings);
  validate(options.speculative);
  if (options.speculative.enabled() && !options.use_cache) fail("generate: speculative decoding needs the KV cache");
  // Drafts stay inside prompt + max_new_tokens positions (see `room` below): no extra room needed.
  KVCache cache = cache_for(model, total, options.kv_type);
  SequenceKV seq;
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  GenerateResult result;
  result.finish_reason = "length";
  const std::size_t vocab = config.vocab_size;
  std::vector<int32_t> input;
  std::vector<float> logits;  // reused by every step
  for (int step = 0; static_cast<int>(result.tokens.size()) < options.max_new_tokens; ++step) {
    std::vector<int32_t> draft;
    if (!options.use_cache) {
      seq.release(cache);  // no reuse: every step starts from an empty cache
      input = sequence;
    } else if (step == 0) {
      input = sequence;
    } else {
      // A draft never runs past max_new_tokens: the last emitted token may be the model's own.
      const int room = options.max_new_tokens - static_cast<int>(result.tokens.size()) - 1;
      if (options.speculative.enabled()) draft = ngram_draft(sequence, options.speculative, room);
      input.assign(1, sequence.back());
      input.insert(input.end(), draft.begin(), draft.end());
    }
    if (!seq.reserve(cache, static_cast<int>(input.size()))) fail("generate: KV cache exhausted");
    BatchEntry entry{input, &seq, draft.empty() ? EntryOutput::last_logits : EntryOutput::all_logits};
    model.forward_into(std::span<const BatchEntry>(&entry, 1), cache, logits);
    ++result.forward_passes;
    result.positions_fed.push_back(static_cast<int>(input.size()));
    result.drafted_tokens += static_cast<int>(draft.size());
    // Row i follows the last token and draft[0..i-1]: keep draft[i] while it is the argmax.
    bool stop = false;
    for (std::size_t i = 0; i <= draft.size(); ++i) {
      std::span<const float> row(logits.data() + i * vocab, vocab);
      if (options.on_step_logits) options.on_step_logits(row);
      const int32_t next = argmax(row);
      result.tokens.push_back(next);
      sequence.push_back(next);
      if (options.on_token) options.on_token(next);
      if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
        result.finish_reason = "stop";
        stop = true;
        break;
      }
      if (i == draft.size() || next != draft[i]) break;
      ++result.accepted_tokens;
    }
    if (stop) break;
    // The cache keeps the positions whose tokens were kept; the newest token is fed next step.
    if (options.use_cache) seq.length = static_cast<int>(sequence.size()) - 1;
  }
  seq.release(cache);
  return result;
}

std::vector<float> prompt_logits(Model& model, std::span<const int32_t> prompt) {
  if (prompt.empty()) fail("prompt_logits: the prompt is empty");
  KVCache cache = cache_for(model, prompt.size());
  SequenceKV seq;
  if (!seq.reserve(cache, static_cast<int>(prompt.size()))) fail("prompt_logits: KV cache exhausted");
  BatchEntry entry{prompt, &seq, EntryOutput::all_logits};
  std::vector<float> logits = model.forward(std::span<const BatchEntry>(&entry, 1), cache);
  seq.release(cache);
  return logits;
}

}  // namespace inferlab
