#include "inferlab/generation/scheduler.h"
#include "inferlab/util/thread_name.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace inferlab {

namespace {

// FNV-1a over the parent's hash and the block's token ids: the key of one full KV block.
uint64_t block_hash(uint64_t parent, const int32_t* tokens, int count) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(&parent, sizeof parent);
  mix(tokens, sizeof(int32_t) * count);
  return h;
}

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

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
double milliseconds(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

std::size_t default_kv_tokens(const ModelConfig& config, int max_batch, KVType type) {
  const std::size_t per_token = kv_bytes_per_token(config, kv_element_bytes(type));
  const std::size_t context = std::max(config.max_position_embeddings, 1);
  const std::size_t budget = per_token ? (std::size_t{1} << 30) / per_token : context;
  const std::size_t wanted = context * static_cast<std::size_t>(std::max(max_batch, 1));
  return std::max(context, std::min(wanted, budget));
}

// ---- Scheduler ----

struct Scheduler::Sequence {
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

  Sequence(GenerationRequest r) : request(std::move(r)), sampler(request.sampling) {
    if (request.grammar && request.grammar_trigger.empty()) matcher.emplace(request.grammar);
  }
  int uncomputed() const { return static_cast<int>(tokens.size()) - kv.length; }
};

Scheduler::Scheduler(Model& model, SchedulerOptions options)
    : model_(model),
      options_(options),
      cache_(model.config(),
             options.kv_tokens ? options.kv_tokens : default_kv_tokens(model.config(), options.max_batch, options.kv_type),
             options.block_size, options.kv_type) {
  if (options_.max_batch < 1) fail("max batch must be at least 1, got {}", options_.max_batch);
  if (options_.step_token_budget < 1) fail("step token budget must be at least 1, got {}", options_.step_token_budget);
  if (options_.max_waiting < 1) fail("max waiting must be at least 1, got {}", options_.max_waiting);
  validate(options_.speculative);
  stats_.kv_blocks_total = cache_.num_blocks();
  stats_.block_size = cache_.block_size();
  mark_progress();
  engine_ = std::thread([this] {
    name_this_thread("engine");
    engine_loop();
  });
}

Scheduler::~Scheduler() { shutdown("server shutting down"); }

std::size_t Scheduler::capacity_tokens() const {
  return static_cast<std::size_t>(cache_.num_blocks()) * cache_.block_size();
}

std::shared_ptr<RequestStream> Scheduler::submit(GenerationRequest request) {
  const std::size_t prompt = request.prompt.size();
  const std::size_t context = model_.config().max_position_embeddings;
  auto reject = [&] {
    std::lock_guard lock(mutex_);
    ++stats_.requests_rejected;
  };
  if (prompt == 0) {
    reject();
    fail("the prompt is empty: at least one token is needed");
  }
  if (request.max_tokens < 1) {
    reject();
    fail("max_tokens must be at least 1, got {}", request.max_tokens);
  }
  const int vocab = model_.config().vocab_size;
  for (int32_t id : request.prompt)
    if (id < 0 || id >= vocab) {
      reject();
      fail("prompt token id {} is outside the vocabulary (0..{})", id, vocab - 1);
    }
  if (context > 0 && prompt + request.max_tokens > context) {
    reject();
    fail("this model's context is {} tokens; the prompt has {} and max_tokens asks for {} more",
         context, prompt, request.max_tokens);
  }
  if (prompt + request.max_tokens > capacity_tokens()) {
    reject();
    fail("the prompt ({} tokens) plus max_tokens ({}) can never fit the KV cache of {} tokens (raise --kv-tokens)",
         prompt, request.max_tokens, capacity_tokens());
  }
  auto seq = std::make_unique<Sequence>(std::move(request));
  seq->stream = std::make_shared<RequestStream>();
  seq->stream->wake_engine_ = [this] {
    has_work_ = true;
    wake_.notify_all();
  };
  seq->tokens = seq->request.prompt;
  seq->submitted = Clock::now();
  seq->arrival_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  auto stream = seq->stream;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      ++stats_.requests_rejected;
      throw OverloadedError("the server is shutting down");
    }
    if (stats_.waiting + static_cast<int>(incoming_.size()) >= options_.max_waiting) {
      ++stats_.requests_rejected;
      throw OverloadedError(fmt::format("too many queued requests ({}); retry later", options_.max_waiting));
    }
    ++stats_.requests_submitted;
    stats_.prompt_tokens += prompt;
    incoming_.push_back(std::move(seq));
    has_work_ = true;
  }
  wake_.notify_all();
  return stream;
}

void Scheduler::shutdown(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      stop_reason_ = reason;
    }
  }
  wake_.notify_all();
  if (engine_.joinable()) engine_.join();
}

void Scheduler::mark_progress() {
  progress_ticks_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

double Scheduler::seconds_since_progress() const {
  return seconds(Clock::now().time_since_epoch() - Clock::duration(progress_ticks_.load(std::memory_order_relaxed)));
}

bool Scheduler::idle() const {
  std::lock_guard lock(mutex_);
  return incoming_.empty() && stats_.waiting == 0 && stats_.running == 0;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Scheduler::engine_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (stopping_) break;
      stats_.waiting += static_cast<int>(incoming_.size());
      while (!incoming_.empty()) {
        incoming_.front()->arrival = next_arrival_++;
        waiting_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    mark_progress();
    bool worked = false;
    try {
      worked = step();
    } catch (const std::exception& e) {
      // A failed forward step: every sequence in flight gets the error; the engine keeps serving.
      std::string message = fmt::format("generation failed: {}", e.what());
      for (auto& seq : running_) finish(*seq, FinishReason::error, message);
      running_.clear();
    }
    mark_progress();
    publish_stats();
    if (!worked) {
      std::unique_lock lock(mutex_);
      // Wake for new work, a cancel, shutdown, or to check deadlines of queued requests.
      wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_ || !incoming_.empty() || has_work_.load(); });
      has_work_ = false;
    }
  }
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    reason = stop_reason_;
    while (!incoming_.empty()) {
      waiting_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
  }
  for (auto& seq : running_) finish(*seq, FinishReason::error, reason);
  for (auto& seq : waiting_) finish(*seq, FinishReason::error, reason);
  running_.clear();
  waiting_.clear();
  publish_stats();
}

void Scheduler::finish(Sequence& seq, FinishReason reason, const std::string& error, bool request_error) {
  seq.kv.release(cache_);
  seq.block_hashes.clear();
  StreamEvent event;
  event.finish = reason;
  event.error = error;
  event.request_error = request_error;
  event.timings = timings_of(seq, Clock::now());
  const RequestTimings& t = *event.timings;
  {
    std::lock_guard lock(mutex_);
    ++stats_.requests_finished[static_cast<int>(reason)];
    if (reason == FinishReason::stop || reason == FinishReason::length) {
      stats_.e2e_latency.observe(t.e2e_ms() / 1000);
      stats_.queue_time.observe(t.queue_ms / 1000);
      stats_.prefill_time.observe(t.prefill_ms / 1000);
      stats_.decode_time.observe(t.decode_ms / 1000);
    }
  }
  seq.stream->push(std::move(event));
}

RequestTimings Scheduler::timings_of(Sequence& seq, Clock::time_point end) {
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

void Scheduler::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  auto ended = [&](Sequence& seq) {
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
  };
  std::erase_if(running_, [&](auto& seq) { return ended(*seq); });
  std::erase_if(waiting_, [&](auto& seq) { return ended(*seq); });
}

bool Scheduler::make_room(int blocks) {
  while (cache_.free_blocks() < blocks) {
    auto victim = prefix_cache_.end();
    for (auto it = prefix_cache_.begin(); it != prefix_cache_.end(); ++it)
      if (cache_.refcount(it->second.block) == 1 &&
          (victim == prefix_cache_.end() || it->second.last_used < victim->second.last_used))
        victim = it;
    if (victim == prefix_cache_.end()) return false;
    cache_.release(victim->second.block);
    prefix_cache_.erase(victim);
  }
  return true;
}

void Scheduler::match_prefix(Sequence& seq) {
  if (!options_.prefix_caching) return;
  const int bs = cache_.block_size();
  // Leave at least one token to compute: its logits give the first generated token.
  const int matchable = (static_cast<int>(seq.tokens.size()) - 1) / bs;
  uint64_t parent = 0;
  for (int i = 0; i < matchable; ++i) {
    const int32_t* block_tokens = seq.tokens.data() + static_cast<std::size_t>(i) * bs;
    uint64_t h = block_hash(parent, block_tokens, bs);
    auto it = prefix_cache_.find(h);
    if (it == prefix_cache_.end() || it->second.parent != parent ||
        !std::equal(it->second.tokens.begin(), it->second.tokens.end(), block_tokens))
      break;
    it->second.last_used = ++clock_;
    cache_.retain(it->second.block);
    seq.kv.blocks.push_back(it->second.block);
    seq.kv.length += bs;
    seq.block_hashes.push_back(h);
    parent = h;
  }
}

void Scheduler::register_full_blocks(Sequence& seq) {
  if (!options_.prefix_caching) return;
  const int bs = cache_.block_size();
  const std::size_t full = static_cast<std::size_t>(seq.kv.length / bs);
  while (seq.block_hashes.size() < full) {
    const std::size_t i = seq.block_hashes.size();
    const int32_t* block_tokens = seq.tokens.data() + i * bs;
    uint64_t parent = i ? seq.block_hashes[i - 1] : 0;
    uint64_t h = block_hash(parent, block_tokens, bs);
    auto [it, inserted] = prefix_cache_.try_emplace(h);
    if (inserted) {
      it->second = CachedBlock{seq.kv.blocks[i], parent, std::vector<int32_t>(block_tokens, block_tokens + bs), ++clock_};
      cache_.retain(seq.kv.blocks[i]);
    }
    seq.block_hashes.push_back(h);
  }
}

Scheduler::Sequence* Scheduler::preempt_newest() {
  auto newest = std::max_element(running_.begin(), running_.end(),
                                 [](auto& a, auto& b) { return a->arrival < b->arrival; });
  std::unique_ptr<Sequence> seq = std::move(*newest);
  running_.erase(newest);
  // Recompute later from prompt + generated tokens; the sampler keeps its state, so the output
  // is the same as if it had never been interrupted.
  seq->kv.release(cache_);
  seq->block_hashes.clear();
  ++seq->preemptions;
  Sequence* preempted = seq.get();
  waiting_.push_front(std::move(seq));
  std::lock_guard lock(mutex_);
  ++stats_.preemptions;
  return preempted;
}

void Scheduler::admit() {
  const int bs = cache_.block_size();
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_batch) {
    Sequence& seq = *waiting_.front();
    match_prefix(seq);
    const int needed_blocks =
        static_cast<int>((seq.tokens.size() + bs - 1) / bs) - static_cast<int>(seq.kv.blocks.size());
    // Keep a few blocks back so running sequences can grow without preempting the newcomer.
    const int watermark = running_.empty() ? 0 : std::max(1, cache_.num_blocks() / 100);
    if (!make_room(needed_blocks + watermark) || !seq.kv.reserve(cache_, seq.uncomputed())) {
      seq.kv.release(cache_);  // the matched prefix, if any
      seq.block_hashes.clear();
      break;  // first come, first served: it waits until blocks free up
    }
    const int cached = seq.kv.length;
    if (!seq.scheduled) seq.scheduled = Clock::now();
    if (seq.generated == 0) {
      seq.stream->cached_prompt_tokens_ = cached;
      std::lock_guard lock(mutex_);
      stats_.prefix_cache_hit_tokens += cached;
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

bool Scheduler::step() {
  drop_cancelled_and_expired();
  admit();
  if (running_.empty()) return false;

  // Decode first (one token each), then prompt chunks within the step's token budget.
  std::vector<Sequence*> decoding, prefilling;
  for (auto& seq : running_) (seq->uncomputed() == 1 && seq->generated > 0 ? decoding : prefilling).push_back(seq.get());
  // Every decoding sequence needs room for one more position; when the pool is dry, evict
  // prefix-cache blocks, then preempt the newest arrival (it recomputes later).
  for (std::size_t i = 0; i < decoding.size();) {
    Sequence* seq = decoding[i];
    if (seq->kv.reserve(cache_, 1)) {
      ++i;
      continue;
    }
    if (make_room(1)) continue;
    Sequence* victim = preempt_newest();
    auto at = std::find(decoding.begin(), decoding.end(), victim);
    if (at != decoding.end()) {
      if (static_cast<std::size_t>(at - decoding.begin()) < i) --i;
      decoding.erase(at);
    }
    std::erase(prefilling, victim);
  }
  struct Planned {
    Sequence* seq;
    int count;
    std::vector<int32_t> draft;  // speculative: proposed tokens fed after the last one
  };
  std::vector<Planned> plan;
  int budget = options_.step_token_budget;
  for (Sequence* seq : decoding) {
    Planned& p = plan.emplace_back(Planned{seq, 1, {}});
    // A draft only where its positions fit the blocks free now (never evicting or preempting for
    // it) and never past max_tokens or the context; constrained sequences are not drafted.
    if (!options_.speculative.enabled() || seq->request.grammar || budget <= 0) continue;
    const std::size_t context = model_.config().max_position_embeddings;
    int room = std::min(seq->request.max_tokens - seq->generated - 1, budget);
    if (context > 0) room = std::min(room, static_cast<int>(context) - static_cast<int>(seq->tokens.size()) - 1);
    p.draft = ngram_draft(seq->tokens, options_.speculative, room);
    if (p.draft.empty()) continue;
    if (!seq->kv.reserve(cache_, 1 + static_cast<int>(p.draft.size()))) {
      p.draft.clear();
      continue;
    }
    p.count += static_cast<int>(p.draft.size());
    budget -= static_cast<int>(p.draft.size());
  }
  for (Sequence* seq : prefilling) {
    if (budget <= 0) break;
    int count = std::min(seq->uncomputed(), budget);
    budget -= count;
    plan.push_back({seq, count, {}});
  }
  if (plan.empty()) return true;

  std::vector<BatchEntry> batch;
  batch.reserve(plan.size());
  std::vector<std::vector<int32_t>> drafted_inputs;  // [last token, draft...] of drafted sequences
  drafted_inputs.reserve(plan.size());
  std::size_t rows = 0;
  for (auto& p : plan) {
    BatchEntry entry;
    if (p.draft.empty()) {
      entry.tokens = std::span<const int32_t>(p.seq->tokens.data() + p.seq->kv.length, p.count);
    } else {
      std::vector<int32_t>& input = drafted_inputs.emplace_back(1, p.seq->tokens.back());
      input.insert(input.end(), p.draft.begin(), p.draft.end());
      entry.tokens = input;
      entry.all_logits = true;  // one row per draft position, to verify each
    }
    entry.kv = &p.seq->kv;
    batch.push_back(entry);
    rows += entry.all_logits ? entry.tokens.size() : 1;
  }
  model_.forward_into(batch, cache_, logits_);
  std::vector<float>& logits = logits_;  // the grammar masks rows in place
  const std::size_t vocab = model_.config().vocab_size;
  if (logits.size() != rows * vocab)
    fail("model returned {} logits for {} rows of vocab {}", logits.size(), rows, vocab);

  const auto now = Clock::now();
  uint64_t prefill_tokens = 0, new_tokens = 0;
  std::vector<double> itls, ttfts;
  std::vector<Sequence*> done_length, done_stop;
  struct Failed {
    Sequence* seq;
    std::string message;
    bool request_error = false;  // the request's grammar, not the server
  };
  std::vector<Failed> done_error;
  uint64_t drafted = 0, accepted = 0;
  // One generated token of seq: counted, timed, checked against the grammar and the stop rules,
  // streamed. False when the sequence is done (its last event follows in finish()).
  auto emit = [&](Sequence& seq, SampledToken sampled) -> bool {
    seq.tokens.push_back(sampled.token);
    ++seq.generated;
    ++new_tokens;
    seq.token_ms.push_back(milliseconds(now - seq.submitted));
    if (!seq.first_token) {
      ttfts.push_back(seconds(now - seq.submitted));
      seq.first_token = now;
    } else {
      itls.push_back(seconds(now - seq.last_token));
    }
    seq.last_token = now;
    const bool is_stop = std::find(seq.request.stop_token_ids.begin(), seq.request.stop_token_ids.end(),
                                   sampled.token) != seq.request.stop_token_ids.end();
    bool grammar_done = false;
    if (seq.matcher && !is_stop) {
      if (!seq.matcher->accept_token(sampled.token)) {
        done_error.push_back({&seq, fmt::format("constrained decoding: the sampled token {} does not fit the grammar", sampled.token)});
        return false;
      }
      grammar_done = seq.matcher->terminated();
    } else if (seq.request.grammar && !is_stop) {
      // Waiting for the trigger: the grammar applies to what follows its first occurrence.
      const std::string& trigger = seq.request.grammar_trigger;
      seq.before_trigger += seq.request.grammar->vocabulary().bytes(sampled.token);
      if (auto at = seq.before_trigger.find(trigger); at != std::string::npos) {
        seq.matcher.emplace(seq.request.grammar);
        if (!seq.matcher->accept_bytes(std::string_view(seq.before_trigger).substr(at + trigger.size()))) {
          done_error.push_back({&seq, "constrained decoding: the text after the trigger does not fit the grammar"});
          return false;
        }
        grammar_done = seq.matcher->terminated();
      } else if (seq.before_trigger.size() > trigger.size()) {
        seq.before_trigger.erase(0, seq.before_trigger.size() - trigger.size());
      }
    }
    StreamEvent event;
    event.token = std::move(sampled);
    seq.stream->push(std::move(event));
    const std::size_t context = model_.config().max_position_embeddings;
    if (is_stop || grammar_done) {
      done_stop.push_back(&seq);
      return false;
    }
    if (seq.generated >= seq.request.max_tokens || (context > 0 && seq.tokens.size() >= context)) {
      done_length.push_back(&seq);
      return false;
    }
    return true;
  };
  std::size_t row = 0;
  for (const Planned& p : plan) {
    Sequence& seq = *p.seq;
    float* row_logits = logits.data() + row * vocab;
    row += p.draft.empty() ? 1 : p.draft.size() + 1;
    if (!p.draft.empty()) {
      // Keep the longest prefix of the draft the sampler accepts, then its own token; the cache
      // drops the positions of the refused part (they are overwritten when the sequence grows).
      DraftOutcome outcome = verify_draft(seq.sampler, row_logits, vocab, p.draft);
      drafted += p.draft.size();
      accepted += outcome.accepted;
      seq.drafted_tokens += static_cast<int>(p.draft.size());
      seq.accepted_tokens += outcome.accepted;
      for (SampledToken& token : outcome.emitted)
        if (!emit(seq, std::move(token))) break;
      seq.kv.length = std::min(seq.kv.length, static_cast<int>(seq.tokens.size()) - 1);
      register_full_blocks(seq);
      continue;
    }
    if (seq.generated == 0 || p.count > 1) prefill_tokens += p.count;
    register_full_blocks(seq);
    if (seq.uncomputed() > 0) continue;  // mid-prompt chunk: its logits are not needed
    if (seq.matcher) {
      bool open = false;
      try {
        open = apply_grammar(*seq.matcher, seq.mask, row_logits, vocab, seq.request.stop_token_ids);
      } catch (const GrammarError& e) {  // a limit of the grammar's automaton: the grammar asked too much
        done_error.push_back({&seq, fmt::format("constrained decoding failed: {}", e.what()), true});
        continue;
      } catch (const std::exception& e) {
        done_error.push_back({&seq, fmt::format("constrained decoding failed: {}", e.what())});
        continue;
      }
      if (!open) {  // complete with no stop token to end on (ignore_eos), or no token fits at all
        if (seq.matcher->can_finish()) done_stop.push_back(&seq);
        else done_error.push_back({&seq, "constrained decoding: no token of the vocabulary can continue the grammar here"});
        continue;
      }
    }
    emit(seq, seq.sampler.sample(std::span<const float>(row_logits, vocab)));
  }
  {
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    stats_.prefill_tokens += prefill_tokens;
    stats_.generation_tokens += new_tokens;
    stats_.draft_tokens += drafted;
    stats_.accepted_draft_tokens += accepted;
    if (!decoding.empty()) {
      ++stats_.decode_steps;
      if (decoding.size() > 1) ++stats_.batched_decode_steps;
      stats_.decode_batch_size.observe(static_cast<double>(decoding.size()));
    }
    for (double t : ttfts) stats_.time_to_first_token.observe(t);
    for (double t : itls) stats_.inter_token_latency.observe(t);
  }
  for (Sequence* seq : done_stop) finish(*seq, FinishReason::stop);
  for (Sequence* seq : done_length) finish(*seq, FinishReason::length);
  for (const Failed& f : done_error) finish(*f.seq, FinishReason::error, f.message, f.request_error);
  if (!done_stop.empty() || !done_length.empty() || !done_error.empty())
    std::erase_if(running_, [&](auto& seq) {
      return std::find(done_stop.begin(), done_stop.end(), seq.get()) != done_stop.end() ||
             std::find(done_length.begin(), done_length.end(), seq.get()) != done_length.end() ||
             std::find_if(done_error.begin(), done_error.end(), [&](const Failed& f) { return f.seq == seq.get(); }) != done_error.end();
    });
  return true;
}

std::vector<SequenceSnapshot> Scheduler::running_sequences() const {
  std::lock_guard lock(mutex_);
  return running_snapshot_;
}

void Scheduler::publish_stats() {
  int cached_only = 0;
  for (const auto& [hash, entry] : prefix_cache_)
    if (cache_.refcount(entry.block) == 1) ++cached_only;
  std::vector<SequenceSnapshot> snapshot;
  snapshot.reserve(running_.size());
  for (const auto& seq : running_) {
    SequenceSnapshot& row = snapshot.emplace_back();
    row.id = seq->arrival;
    row.prompt_tokens = static_cast<int>(seq->tokens.size()) - seq->generated;
    row.cached_tokens = seq->stream->cached_prompt_tokens();
    row.computed_tokens = seq->kv.length;
    row.generated_tokens = seq->generated;
    row.max_tokens = seq->request.max_tokens;
    row.kv_blocks = static_cast<int>(seq->kv.blocks.size());
    row.preemptions = seq->preemptions;
    row.arrival = seq->submitted;
    row.scheduled = seq->scheduled;
    row.first_token = seq->first_token;
  }
  std::sort(snapshot.begin(), snapshot.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::lock_guard lock(mutex_);
  running_snapshot_ = std::move(snapshot);
  stats_.waiting = static_cast<int>(waiting_.size());
  stats_.running = static_cast<int>(running_.size());
  stats_.kv_blocks_cached = cached_only;
  stats_.kv_blocks_in_use = cache_.used_blocks() - cached_only;
}

}  // namespace inferlab
