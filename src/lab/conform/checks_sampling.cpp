// Conformance checks: the sampling fields clients send beyond OpenAI's, graded by the meaning of
// who defines them — `repetition_penalty` (transformers' and vLLM's: a repeated token's logit
// divided by it when positive, multiplied when negative; must be > 0) and `min_tokens` (vLLM's: no
// end of sequence before that many tokens). Each is seen in what the server generates, not only
// accepted.
#include <algorithm>

#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

// A greedy chat answer's text and its tokens (from logprobs; none when the server sends none).
struct Answered {
  std::string text;
  std::vector<std::string> tokens;
  std::string finish_reason;
  long completion_tokens = 0;
};

Answered greedy_chat(Probe& p, const json& extra) {
  json body = p.chat({{"temperature", 0}, {"logprobs", true}});
  body.update(extra);
  Answer a = p.post("/v1/chat/completions", body);
  if (a.status != 200) fail_check(fmt::format("status {} for {}", a.status, extra.dump()));
  const json& c = first_choice(a);
  Answered out;
  if (c.contains("message") && c["message"].is_object() && c["message"].value("content", json()).is_string())
    out.text = c["message"]["content"].get<std::string>();
  out.finish_reason = c.value("finish_reason", json()).is_string() ? c["finish_reason"].get<std::string>() : "";
  if (c.contains("logprobs") && c["logprobs"].is_object() && c["logprobs"].value("content", json()).is_array())
    for (const json& t : c["logprobs"]["content"])
      if (t.is_object() && t.value("token", json()).is_string()) out.tokens.push_back(t["token"].get<std::string>());
  const json usage = a.parsed.value("usage", json());
  if (usage.is_object() && usage.value("completion_tokens", json()).is_number_integer()) out.completion_tokens = usage["completion_tokens"].get<long>();
  return out;
}

// The most times one token occurs in `tokens`.
int most_repeats(const std::vector<std::string>& tokens) {
  std::map<std::string, int> counts;
  int most = 0;
  for (const auto& t : tokens) most = std::max(most, ++counts[t]);
  return most;
}

// A strong penalty changes a greedy answer that repeats itself; a server that ignores the field
// answers the same text.
std::string repetition_penalty(Probe& p) {
  const Answered plain = greedy_chat(p, {{"max_tokens", 48}});
  if (plain.tokens.empty()) skip_check("the server sends no logprobs tokens, so repeats cannot be seen");
  const int repeats = most_repeats(plain.tokens);
  if (repeats < 3) skip_check(fmt::format("the greedy answer repeats no token 3 times ({} tokens)", plain.tokens.size()));
  const Answered penalized = greedy_chat(p, {{"max_tokens", 48}, {"repetition_penalty", 2.0}});
  require(penalized.text != plain.text,
          fmt::format("repetition_penalty 2.0 left the greedy answer unchanged (a token repeated {} times in it): the field "
                      "is ignored", repeats),
          cut(plain.text));
  return fmt::format("the greedy answer changed (most repeats {} -> {})", repeats, most_repeats(penalized.tokens));
}

std::string repetition_penalty_range(Probe& p) {
  Answer a = p.post("/v1/chat/completions", p.chat({{"max_tokens", 2}, {"repetition_penalty", 0}}));
  require_error(a, 400);
  return "400 for repetition_penalty 0";
}

// An answer that ends on its own after k tokens goes on to at least k + 4 with min_tokens k + 4.
std::string min_tokens(Probe& p) {
  const Answered plain = greedy_chat(p, {{"max_tokens", 64}});
  if (plain.finish_reason != "stop" || plain.completion_tokens <= 0 || plain.completion_tokens > 56)
    skip_check(fmt::format("the greedy answer does not end on its own within 56 tokens (finish {}, {} tokens)",
                           plain.finish_reason, plain.completion_tokens));
  const long want = plain.completion_tokens + 4;
  const Answered longer = greedy_chat(p, {{"max_tokens", 64}, {"min_tokens", want}});
  require(longer.completion_tokens >= want,
          fmt::format("min_tokens {}: the answer ended after {} tokens ({} without it)", want, longer.completion_tokens,
                      plain.completion_tokens));
  return fmt::format("ended at {} tokens alone, {} with min_tokens {}", plain.completion_tokens, longer.completion_tokens, want);
}

}  // namespace

void add_sampling_checks(std::vector<Check>& checks) {
  checks.push_back({"sampling.repetition_penalty", "repetition_penalty 2.0 changes a greedy answer that repeats tokens", repetition_penalty});
  checks.push_back({"sampling.repetition_penalty_range", "repetition_penalty 0: 400 (it must be > 0, as vLLM requires)", repetition_penalty_range});
  checks.push_back({"sampling.min_tokens", "min_tokens: an answer that ends early runs to at least min_tokens", min_tokens});
}

}  // namespace inferlab::lab::conform
