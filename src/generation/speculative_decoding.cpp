#include "inferlab/generation/speculative_decoding.h"

#include <algorithm>

#include "inferlab/util/error.h"

namespace inferlab {

void validate(const SpeculativeOptions& o) {
  if (o.method != "off" && o.method != "ngram")
    fail("--speculative must be off or ngram, got '{}' (draft models are not supported)", o.method);
  if (o.draft_max < 1 || o.draft_max > 64) fail("--draft-max must be between 1 and 64, got {}", o.draft_max);
  if (o.ngram_min < 1) fail("--ngram-min must be at least 1, got {}", o.ngram_min);
  if (o.ngram_max < o.ngram_min) fail("--ngram-max ({}) must be at least --ngram-min ({})", o.ngram_max, o.ngram_min);
}

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const SpeculativeOptions& o, int limit) {
  const int count = std::min(o.draft_max, limit);
  const std::size_t size = tokens.size();
  if (count <= 0) return {};
  for (int n = std::min<int>(o.ngram_max, static_cast<int>(size) - 1); n >= o.ngram_min; --n) {
    const auto suffix = tokens.subspan(size - n);
    // The most recent occurrence with a whole draft after it (the freshest context is the likeliest
    // to continue); failing that, the one with the longest continuation (a run like "a a a" finds
    // itself one token back, with one token to propose).
    std::size_t best_from = 0, best_take = 0;
    for (std::size_t start = size - n; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const std::size_t from = start + n;
      const std::size_t take = std::min<std::size_t>(count, size - from);
      if (take > best_take) best_from = from, best_take = take;
      if (take == static_cast<std::size_t>(count)) break;
    }
    if (best_take) return {tokens.begin() + best_from, tokens.begin() + best_from + best_take};
  }
  return {};
}

DraftOutcome verify_draft(Sampler& sampler, const float* rows, std::size_t vocab, std::span<const int32_t> draft) {
  DraftOutcome outcome;
  for (std::size_t i = 0; i <= draft.size(); ++i) {
    std::span<const float> row(rows + i * vocab, vocab);
    if (i == draft.size()) {  // every draft token kept: the last row gives one more
      outcome.emitted.push_back(sampler.sample(row));
      break;
    }
    bool accepted = false;
    outcome.emitted.push_back(sampler.verify(row, draft[i], accepted));
    if (!accepted) break;
    ++outcome.accepted;
  }
  return outcome;
}

}  // namespace inferlab
