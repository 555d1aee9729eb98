// Prompt-lookup speculative decoding (the "ngram" method of vLLM, llama.cpp's lookup decoding):
// draft up to draft_max tokens by finding the last n tokens of the sequence earlier in it (prompt
// and output so far) and proposing what followed them there; the model then scores the last token
// and the whole draft in one forward pass, and the longest prefix it agrees with is kept, plus the
// model's own token after it. No draft model, no extra weights: it pays off when the answer
// repeats its prompt (edits, code, quotes, extraction) and costs one slightly wider pass when not.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "inferlab/generation/sampler.h"

namespace inferlab {

struct SpeculativeOptions {
  std::string method = "off";  // "off" or "ngram"
  int draft_max = 8;           // tokens proposed per step
  int ngram_max = 3;           // longest suffix looked up first
  int ngram_min = 1;           // shortest suffix tried

  bool enabled() const { return method != "off"; }
};

// Checks names and ranges; Error naming the option otherwise.
void validate(const SpeculativeOptions& options);

// The draft: what followed an earlier occurrence of the sequence's last n tokens (the most recent
// one with min(draft_max, limit) tokens after it, else the one with the most), n from ngram_max
// down to ngram_min (the longest match wins); empty when nothing matches or limit <= 0.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const SpeculativeOptions& options, int limit);

// Verification of one draft against its rows of logits: rows[i] (vocab wide) is the model's
// distribution after the last token and draft[0..i-1]. Token i of the draft is kept when the
// sampler accepts it (greedy: it is the argmax; sampling: with probability p(draft[i]), else a
// token from p without it — the rule that leaves the output distribution unchanged); the first
// refusal emits the sampler's token instead and ends the step; a fully accepted draft adds a token
// from the last row. Returns the tokens to emit, in order (between 1 and draft.size() + 1).
struct DraftOutcome {
  std::vector<SampledToken> emitted;
  int accepted = 0;  // draft tokens kept (emitted.size() - 1, or all of the draft plus the bonus)
};
DraftOutcome verify_draft(Sampler& sampler, const float* rows, std::size_t vocab, std::span<const int32_t> draft);

}  // namespace inferlab
