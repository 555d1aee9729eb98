#include "generation/output_stage.h"

#include <algorithm>
#include <chrono>

namespace inferlab {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double milliseconds(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

OutputStage::OutputStage(std::size_t context, KVPrefixManager& kv, std::mutex& stats_mutex, SchedulerStats& stats)
    : context_(context), kv_(kv), stats_mutex_(stats_mutex), stats_(stats) {}

void OutputStage::admitted(const std::vector<Admission>& admissions) {
  for (const Admission& admission : admissions) {
    Sequence& seq = *admission.seq;
    if (!seq.scheduled) seq.scheduled = Clock::now();
    if (seq.generated == 0) {
      seq.stream->cached_prompt_tokens_ = admission.cached_tokens;
      std::lock_guard lock(stats_mutex_);
      stats_.prefix_cache_hit_tokens += admission.cached_tokens;
    }
  }
}

bool OutputStage::end_if_left(Sequence& seq, Clock::time_point now) {
  if (seq.stream->stopped()) {
    finish(seq, FinishReason::stop);
    return true;
  }
  if (seq.stream->cancelled()) {
    finish(seq, FinishReason::cancelled);
    return true;
  }
  if (seq.request.deadline && now >= *seq.request.deadline) {
    finish(seq, FinishReason::timeout, "the request timed out");
    return true;
  }
  return false;
}

void OutputStage::finish(Sequence& seq, FinishReason reason, const std::string& error, bool request_error,
                         std::vector<float> embedding) {
  kv_.release(seq.kv, seq.block_hashes);
  StreamEvent event;
  event.finish = reason;
  event.embedding = std::move(embedding);
  event.error = error;
  event.request_error = request_error;
  event.timings = timings_of(seq, Clock::now());
  const RequestTimings& t = *event.timings;
  {
    std::lock_guard lock(stats_mutex_);
    ++stats_.requests_finished[static_cast<int>(reason)];
    if (seq.embeds() && reason == FinishReason::stop) {
      ++stats_.embedding_requests;
      stats_.embedding_tokens += seq.tokens.size();
    }
    if (reason == FinishReason::stop || reason == FinishReason::length) {
      stats_.e2e_latency.observe(t.e2e_ms() / 1000);
      stats_.queue_time.observe(t.queue_ms / 1000);
      stats_.prefill_time.observe(t.prefill_ms / 1000);
      stats_.decode_time.observe(t.decode_ms / 1000);
    }
  }
  seq.stream->push(std::move(event));
}

RequestTimings OutputStage::timings_of(Sequence& seq, Clock::time_point end) {
  RequestTimings t;
  t.arrival_unix_ms = seq.arrival_unix_ms;
  // A stage never reached ends at `end`; later ones stay 0, so the three still add up to e2e.
  const Clock::time_point scheduled = seq.scheduled.value_or(end);
  const Clock::time_point first_token = seq.first_token.value_or(end);
  t.queue_ms = milliseconds(scheduled - seq.submitted);
  t.prefill_ms = milliseconds(first_token - scheduled);
  t.decode_ms = milliseconds(end - first_token);
  t.prompt_tokens = static_cast<int>(seq.request.prompt.size());
  t.cached_tokens = seq.stream->cached_prompt_tokens();
  t.generated_tokens = seq.generated;
  t.preemptions = seq.preemptions;
  t.draft_tokens = seq.drafted_tokens;
  t.accepted_draft_tokens = seq.accepted_tokens;
  t.token_ms = std::move(seq.token_ms);
  return t;
}

void OutputStage::begin_step(Clock::time_point now) {
  now_ = now;
  prefill_tokens_ = new_tokens_ = drafted_ = accepted_ = 0;
  itls_.clear();
  ttfts_.clear();
  done_length_.clear();
  done_stop_.clear();
  done_error_.clear();
  done_embedded_.clear();
}

void OutputStage::count_prefill(const PlannedChunk& chunk) {
  if (chunk.seq->generated == 0 || chunk.count > 1) prefill_tokens_ += chunk.count;
}

void OutputStage::take(Sequence& seq, SampledChunk sampled) {
  if (sampled.ending) {
    if (sampled.ending->reason == FinishReason::stop) done_stop_.push_back(&seq);
    else done_error_.push_back({&seq, std::move(sampled.ending->error), sampled.ending->request_error});
    return;
  }
  drafted_ += sampled.drafted;
  accepted_ += sampled.accepted;
  seq.drafted_tokens += sampled.drafted;
  seq.accepted_tokens += sampled.accepted;
  for (SampledToken& token : sampled.tokens)
    if (!emit(seq, std::move(token))) break;
}

void OutputStage::embedded(Sequence& seq, std::vector<float> embedding) {
  seq.first_token = now_;  // its prefill ends here; an embedding has no decode stage
  done_embedded_.emplace_back(&seq, std::move(embedding));
}

bool OutputStage::emit(Sequence& seq, SampledToken sampled) {
  seq.tokens.push_back(sampled.token);
  ++seq.generated;
  ++new_tokens_;
  seq.token_ms.push_back(milliseconds(now_ - seq.submitted));
  if (!seq.first_token) {
    ttfts_.push_back(seconds(now_ - seq.submitted));
    seq.first_token = now_;
  } else {
    itls_.push_back(seconds(now_ - seq.last_token));
  }
  seq.last_token = now_;
  const bool is_stop = std::find(seq.request.stop_token_ids.begin(), seq.request.stop_token_ids.end(),
                                 sampled.token) != seq.request.stop_token_ids.end();
  bool grammar_done = false;
  if (seq.request.grammar && !is_stop) {
    std::optional<std::string> failure = advance_grammar(seq, sampled.token, grammar_done);
    if (failure) {
      done_error_.push_back({&seq, std::move(*failure)});
      return false;
    }
  }
  StreamEvent event;
  event.token = std::move(sampled);
  seq.stream->push(std::move(event));
  if (is_stop || grammar_done) {
    done_stop_.push_back(&seq);
    return false;
  }
  if (seq.generated >= seq.request.max_tokens || (context_ > 0 && seq.tokens.size() >= context_)) {
    done_length_.push_back(&seq);
    return false;
  }
  return true;
}

// The grammar's side of a new token: the reasoning span it waits out, then the trigger it waits
// for, then the matcher. A message when the token breaks the grammar.
std::optional<std::string> OutputStage::advance_grammar(Sequence& seq, int32_t token, bool& done) {
  using Reasoning = Sequence::Reasoning;
  std::string_view bytes = seq.request.grammar->vocabulary().bytes(token);
  if (seq.reasoning == Reasoning::may_open) {
    seq.reasoning = token == seq.request.reasoning->start_token ? Reasoning::inside : Reasoning::none;
    if (seq.reasoning == Reasoning::inside) return std::nullopt;
  }
  if (seq.reasoning == Reasoning::inside && seq.request.reasoning->header_token >= 0) {
    harmony_header(seq, token, bytes);
    return std::nullopt;
  }
  if (seq.reasoning == Reasoning::inside) {
    const std::string& end = seq.request.reasoning->end;
    std::string after;  // what the grammar sees first
    if (token == seq.request.reasoning->end_token) {
      seq.reasoning = Reasoning::none;
    } else {
      seq.reasoning_tail += bytes;
      const std::size_t at = seq.reasoning_tail.find(end);
      if (at == std::string::npos) {
        if (seq.reasoning_tail.size() > end.size()) seq.reasoning_tail.erase(0, seq.reasoning_tail.size() - end.size());
        return std::nullopt;
      }
      seq.reasoning = Reasoning::none;
      after = seq.reasoning_tail.substr(at + end.size());
    }
    seq.reasoning_tail.clear();
    return after.empty() ? std::nullopt : advance_grammar_text(seq, after, done);
  }
  if (seq.matcher) {
    if (!seq.matcher->accept_token(token))
      return fmt::format("constrained decoding: the sampled token {} does not fit the grammar", token);
    done = seq.matcher->terminated();
    return std::nullopt;
  }
  return advance_grammar_text(seq, bytes, done);
}

// Harmony's span (the messages before the answer): the answer's body starts after the <|message|>
// that closes a header whose channel (its first word) is the span's end ("final"). The header's
// special tokens have no bytes; its words do.
void OutputStage::harmony_header(Sequence& seq, int32_t token, std::string_view bytes) {
  const GenerationRequest::ReasoningSpan& span = *seq.request.reasoning;
  if (token == span.header_token) {
    seq.in_header = true;
    seq.reasoning_tail.clear();
    return;
  }
  if (!seq.in_header) return;  // a body's text
  if (token == span.end_token) {
    seq.in_header = false;
    const std::size_t begin = seq.reasoning_tail.find_first_not_of(" \t\r\n");
    const std::string_view header = begin == std::string::npos ? std::string_view() : std::string_view(seq.reasoning_tail).substr(begin);
    if (header.substr(0, header.find(' ')) == span.end) seq.reasoning = Sequence::Reasoning::none;
    seq.reasoning_tail.clear();
    return;
  }
  if (seq.reasoning_tail.size() < 256) seq.reasoning_tail += bytes;  // the channel is its first word
}

std::optional<std::string> OutputStage::advance_grammar_text(Sequence& seq, std::string_view bytes, bool& done) {
  if (seq.matcher) {
    if (!seq.matcher->accept_bytes(bytes)) return std::string("constrained decoding: the text after the reasoning does not fit the grammar");
    done = seq.matcher->terminated();
    return std::nullopt;
  }
  // Waiting for the trigger: the grammar applies to what follows its first occurrence.
  const std::string& trigger = seq.request.grammar_trigger;
  seq.before_trigger += bytes;
  if (auto at = seq.before_trigger.find(trigger); at != std::string::npos) {
    seq.matcher.emplace(seq.request.grammar);
    if (!seq.matcher->accept_bytes(std::string_view(seq.before_trigger).substr(at + trigger.size())))
      return std::string("constrained decoding: the text after the trigger does not fit the grammar");
    done = seq.matcher->terminated();
  } else if (seq.before_trigger.size() > trigger.size()) {
    seq.before_trigger.erase(0, seq.before_trigger.size() - trigger.size());
  }
  return std::nullopt;
}

std::vector<Sequence*> OutputStage::end_step(const StepPlan& plan) {
  {
    std::lock_guard lock(stats_mutex_);
    ++stats_.steps;
    stats_.prefill_tokens += prefill_tokens_;
    stats_.generation_tokens += new_tokens_;
    stats_.draft_tokens += drafted_;
    stats_.accepted_draft_tokens += accepted_;
    if (plan.decoding > 0) {
      ++stats_.decode_steps;
      if (plan.decoding > 1) ++stats_.batched_decode_steps;
      stats_.decode_batch_size.observe(static_cast<double>(plan.decoding));
    }
    for (double t : ttfts_) stats_.time_to_first_token.observe(t);
    for (double t : itls_) stats_.inter_token_latency.observe(t);
  }
  std::vector<Sequence*> ended;
  for (Sequence* seq : done_stop_) finish(*seq, FinishReason::stop);
  for (Sequence* seq : done_length_) finish(*seq, FinishReason::length);
  for (const Failed& f : done_error_) finish(*f.seq, FinishReason::error, f.message, f.request_error);
  for (auto& [seq, embedding] : done_embedded_) {
    finish(*seq, FinishReason::stop, "", false, std::move(embedding));
    ended.push_back(seq);
  }
  ended.insert(ended.end(), done_stop_.begin(), done_stop_.end());
  ended.insert(ended.end(), done_length_.begin(), done_length_.end());
  for (const Failed& f : done_error_) ended.push_back(f.seq);
  return ended;
}

}  // namespace inferlab
