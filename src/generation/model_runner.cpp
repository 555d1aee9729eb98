#include "generation/model_runner.h"

#include <algorithm>
#include <limits>
#include <span>

#include "inferlab/util/error.h"

namespace inferlab {

namespace {

// Constrained decoding: every logit outside the grammar's mask to -inf; the stop tokens keep
// theirs only where the output is complete. False when no token at all is left.
bool apply_grammar(GrammarMatcher& matcher, TokenMask& mask, float* row, std::size_t vocab,
                   const std::vector<int32_t>& stop_ids) {
  matcher.fill_mask(mask);
  const bool complete = matcher.can_finish();
  std::vector<std::pair<int32_t, float>> stops;
  if (complete)
    for (int32_t id : stop_ids)
      if (id >= 0 && static_cast<std::size_t>(id) < vocab) stops.push_back({id, row[id]});
  const float none = -std::numeric_limits<float>::infinity();
  const auto& words = mask.words();
  const std::size_t covered = std::min(vocab, static_cast<std::size_t>(mask.size()));
  bool any = false;
  for (std::size_t w = 0; w * 64 < covered; ++w) {
    const uint64_t bits = words[w];
    const std::size_t base = w * 64, end = std::min(covered, base + 64);
    if (bits == ~uint64_t{0} && end - base == 64) {
      any = true;
      continue;
    }
    for (std::size_t i = base; i < end; ++i)
      if (!((bits >> (i - base)) & 1)) row[i] = none;
    any = any || bits != 0;
  }
  std::fill(row + covered, row + vocab, none);
  for (auto [id, value] : stops) row[id] = value;
  return any || !stops.empty();
}

}  // namespace

ModelRunner::ModelRunner(Model& model, KVCache& cache)
    : model_(model), cache_(cache), vocab_(static_cast<std::size_t>(model.config().vocab_size)) {}

void ModelRunner::forward(const StepPlan& plan) {
  std::vector<BatchEntry> batch;
  batch.reserve(plan.chunks.size());
  std::vector<std::vector<int32_t>> drafted_inputs;  // [last token, draft...] of drafted sequences
  drafted_inputs.reserve(plan.chunks.size());
  first_row_.clear();
  std::size_t rows = 0;
  for (const PlannedChunk& chunk : plan.chunks) {
    BatchEntry entry;
    if (chunk.draft.empty()) {
      entry.tokens = std::span<const int32_t>(chunk.seq->tokens.data() + chunk.seq->kv.length, chunk.count);
    } else {
      std::vector<int32_t>& input = drafted_inputs.emplace_back(1, chunk.seq->tokens.back());
      input.insert(input.end(), chunk.draft.begin(), chunk.draft.end());
      entry.tokens = input;
      entry.all_logits = true;  // one row per draft position, to verify each
    }
    entry.kv = &chunk.seq->kv;
    batch.push_back(entry);
    first_row_.push_back(rows);
    rows += entry.all_logits ? entry.tokens.size() : 1;
  }
  model_.forward_into(batch, cache_, logits_);
  if (logits_.size() != rows * vocab_)
    fail("model returned {} logits for {} rows of vocab {}", logits_.size(), rows, vocab_);
}

SampledChunk ModelRunner::sample(const PlannedChunk& chunk, std::size_t index) {
  Sequence& seq = *chunk.seq;
  float* row = logits_.data() + first_row_.at(index) * vocab_;  // the grammar masks it in place
  SampledChunk out;
  if (!chunk.draft.empty()) {
    // Keep the longest prefix of the draft the sampler accepts, then its own token.
    DraftOutcome outcome = verify_draft(seq.sampler, row, vocab_, chunk.draft);
    out.drafted = static_cast<int>(chunk.draft.size());
    out.accepted = outcome.accepted;
    out.tokens = std::move(outcome.emitted);
    return out;
  }
  if (seq.matcher) {
    bool open = false;
    try {
      open = apply_grammar(*seq.matcher, seq.mask, row, vocab_, seq.request.stop_token_ids);
    } catch (const GrammarError& e) {  // a limit of the grammar's automaton: the grammar asked too much
      out.ending = SampledChunk::Ending{FinishReason::error, fmt::format("constrained decoding failed: {}", e.what()), true};
      return out;
    } catch (const std::exception& e) {
      out.ending = SampledChunk::Ending{FinishReason::error, fmt::format("constrained decoding failed: {}", e.what())};
      return out;
    }
    if (!open) {  // complete with no stop token to end on (ignore_eos), or no token fits at all
      if (seq.matcher->can_finish()) out.ending = SampledChunk::Ending{FinishReason::stop, ""};
      else out.ending = SampledChunk::Ending{FinishReason::error, "constrained decoding: no token of the vocabulary can continue the grammar here"};
      return out;
    }
  }
  out.tokens.push_back(seq.sampler.sample(std::span<const float>(row, vocab_)));
  return out;
}

}  // namespace inferlab
