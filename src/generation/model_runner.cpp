#include "generation/model_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "inferlab/util/error.h"

namespace inferlab {

namespace {

// Constrained decoding: every logit outside the grammar's mask to -inf; the stop tokens keep
// theirs only where the output is complete, and `also_allowed` (>= 0: the token that opens a
// reasoning span) keeps its own. False when no token at all is left.
bool apply_grammar(GrammarMatcher& matcher, TokenMask& mask, float* row, std::size_t vocab,
                   const std::vector<int32_t>& stop_ids, int32_t also_allowed) {
  matcher.fill_mask(mask);
  const bool complete = matcher.can_finish();
  std::vector<std::pair<int32_t, float>> stops;
  if (complete)
    for (int32_t id : stop_ids)
      if (id >= 0 && static_cast<std::size_t>(id) < vocab) stops.push_back({id, row[id]});
  if (also_allowed >= 0 && static_cast<std::size_t>(also_allowed) < vocab) stops.push_back({also_allowed, row[also_allowed]});
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
    : model_(model),
      cache_(cache),
      vocab_(static_cast<std::size_t>(model.config().vocab_size)),
      hidden_(static_cast<std::size_t>(model.config().hidden_size)) {}

void ModelRunner::forward(const StepPlan& plan) {
  std::vector<BatchEntry> batch;
  batch.reserve(plan.chunks.size());
  std::vector<std::vector<int32_t>> drafted_inputs;  // [last token, draft...] of drafted sequences
  drafted_inputs.reserve(plan.chunks.size());
  first_row_.clear();
  std::size_t rows = 0, hidden_rows = 0;
  for (const PlannedChunk& chunk : plan.chunks) {
    BatchEntry entry;
    if (chunk.draft.empty()) {
      entry.tokens = std::span<const int32_t>(chunk.seq->tokens.data() + chunk.seq->kv.length, chunk.count);
    } else {
      std::vector<int32_t>& input = drafted_inputs.emplace_back(1, chunk.seq->tokens.back());
      input.insert(input.end(), chunk.draft.begin(), chunk.draft.end());
      entry.tokens = input;
      entry.output = EntryOutput::all_logits;  // one row per draft position, to verify each
    }
    entry.kv = &chunk.seq->kv;
    if (chunk.seq->embeds()) {
      entry.output = EntryOutput::hidden_states;
      first_row_.push_back(hidden_rows);
      hidden_rows += entry.tokens.size();
    } else {
      first_row_.push_back(rows);
      rows += entry.output == EntryOutput::all_logits ? entry.tokens.size() : 1;
    }
    batch.push_back(entry);
  }
  model_.forward_into(batch, cache_, outputs_);
  if (outputs_.logits.size() != rows * vocab_)
    fail("model returned {} logits for {} rows of vocab {}", outputs_.logits.size(), rows, vocab_);
  if (outputs_.hidden.size() != hidden_rows * hidden_)
    fail("model returned {} hidden-state values for {} rows of width {}", outputs_.hidden.size(), hidden_rows, hidden_);
}

std::vector<float> ModelRunner::embedding(const PlannedChunk& chunk, std::size_t index) const {
  const EmbeddingPooling& pooling = model_.config().pooling;
  const std::size_t rows = static_cast<std::size_t>(chunk.count);
  const float* first = outputs_.hidden.data() + first_row_.at(index) * hidden_;
  std::vector<double> sum(hidden_, 0.0);
  auto add_row = [&](std::size_t r) {
    for (std::size_t i = 0; i < hidden_; ++i) sum[i] += first[r * hidden_ + i];
  };
  switch (pooling.kind) {
    case EmbeddingPooling::Kind::mean:
      for (std::size_t r = 0; r < rows; ++r) add_row(r);
      for (double& v : sum) v /= static_cast<double>(rows);
      break;
    case EmbeddingPooling::Kind::cls: add_row(0); break;
    case EmbeddingPooling::Kind::last: add_row(rows - 1); break;
  }
  double scale = 1.0;
  if (pooling.normalize) {
    double norm = 0;
    for (double v : sum) norm += v * v;
    scale = 1.0 / std::max(std::sqrt(norm), 1e-12);  // torch.nn.functional.normalize's eps
  }
  std::vector<float> out(hidden_);
  for (std::size_t i = 0; i < hidden_; ++i) out[i] = static_cast<float>(sum[i] * scale);
  return out;
}

SampledChunk ModelRunner::sample(const PlannedChunk& chunk, std::size_t index) {
  Sequence& seq = *chunk.seq;
  float* row = outputs_.logits.data() + first_row_.at(index) * vocab_;  // the grammar masks it in place
  SampledChunk out;
  if (!chunk.draft.empty()) {
    // Keep the longest prefix of the draft the sampler accepts, then its own token.
    DraftOutcome outcome = verify_draft(seq.sampler, row, vocab_, chunk.draft);
    out.drafted = static_cast<int>(chunk.draft.size());
    out.accepted = outcome.accepted;
    out.tokens = std::move(outcome.emitted);
    return out;
  }
  if (seq.matcher && seq.reasoning != Sequence::Reasoning::inside) {  // the grammar waits while the model thinks
    const int32_t opens_reasoning = seq.reasoning == Sequence::Reasoning::may_open ? seq.request.reasoning->start_token : -1;
    bool open = false;
    try {
      open = apply_grammar(*seq.matcher, seq.mask, row, vocab_, seq.request.stop_token_ids, opens_reasoning);
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
