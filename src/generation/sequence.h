// One request inside the engine: what it asked, its tokens so far, its KV blocks, its sampler and
// grammar state, and the times its timings are made of. Owned by the planner's queues; the other
// parts of a step see it through pointers. Engine thread only.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/generation/generation_request.h"
#include "inferlab/generation/request_stream.h"
#include "inferlab/generation/sampler.h"
#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/model/kv_cache.h"

namespace inferlab {

struct Sequence {
  // What the request wants: generated tokens, or its input's embedding (the whole input in one
  // step, its hidden states pooled; never matched against or offered to the prefix cache, since a
  // bidirectional encoder's K/V of a prefix depend on what follows it).
  enum class Kind { generate, embed };
  Kind kind = Kind::generate;
  std::shared_ptr<RequestStream> stream;
  GenerationRequest request;
  Sampler sampler;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int generated = 0;
  SequenceKV kv;                // kv.length: positions of `tokens` already computed
  std::vector<uint64_t> block_hashes;  // of kv.blocks' full blocks registered / matched so far
  uint64_t arrival = 0;
  Clock::time_point submitted, last_token;
  // Stage times (RequestTimings): first admission, first token, and each token after arrival.
  int64_t arrival_unix_ms = 0;
  std::optional<Clock::time_point> scheduled, first_token;
  int preemptions = 0;
  int drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding
  std::vector<double> token_ms;
  std::optional<GrammarMatcher> matcher;  // with a grammar, once it applies
  TokenMask mask;
  std::string before_trigger;             // the output's tail while waiting for the trigger
  // Where the output stands towards a reasoning span (GenerationRequest::reasoning), tracked only
  // with a grammar: the grammar waits while the span may open or is open.
  enum class Reasoning { none, may_open, inside };
  Reasoning reasoning = Reasoning::none;
  std::string reasoning_tail;  // the span's tail while inside, to find its end marker (harmony: the header so far)
  bool in_header = false;      // harmony: inside a header (after <|channel|>, before <|message|>)

  explicit Sequence(GenerationRequest r) : request(std::move(r)), sampler(request.sampling, request.prompt, request.stop_token_ids) {
    if (request.grammar && request.grammar_trigger.empty()) matcher.emplace(request.grammar);
    if (request.grammar && request.reasoning) {
      if (request.reasoning->open) reasoning = Reasoning::inside;
      else if (request.reasoning->start_token >= 0) reasoning = Reasoning::may_open;
    }
  }
  int uncomputed() const { return static_cast<int>(tokens.size()) - kv.length; }
  bool embeds() const { return kind == Kind::embed; }
};

}  // namespace inferlab
