#include "inferlab/generation/scheduler.h"

#include <algorithm>
#include <chrono>

#include "generation/kv_prefix_manager.h"
#include "generation/model_runner.h"
#include "generation/output_stage.h"
#include "generation/planner.h"
#include "generation/sequence.h"
#include "inferlab/util/thread_name.h"

// The thin loop: each step asks the planner what to run, the model runner to run and sample it,
// the output stage to stream and end it; the KV/prefix manager holds the blocks throughout.

namespace inferlab {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::size_t default_kv_tokens(const ModelConfig& config, int max_batch, KVType type) {
  const std::size_t per_token = kv_bytes_per_token(config, kv_element_bytes(type));
  const std::size_t context = std::max(config.max_position_embeddings, 1);
  const std::size_t budget = per_token ? (std::size_t{1} << 30) / per_token : context;
  const std::size_t wanted = context * static_cast<std::size_t>(std::max(max_batch, 1));
  return std::max(context, std::min(wanted, budget));
}

// ---- Scheduler ----

Scheduler::Scheduler(Model& model, SchedulerOptions options)
    : model_(model),
      options_(options),
      cache_(model.config(),
             options.kv_tokens ? options.kv_tokens : default_kv_tokens(model.config(), options.max_batch, options.kv_type),
             options.block_size, options.kv_type, model.backend()) {
  const std::size_t context = model.config().max_position_embeddings;
  kv_ = std::make_unique<KVPrefixManager>(cache_, options_.prefix_caching);
  // The planner checks max_batch and step_token_budget.
  planner_ = std::make_unique<Planner>(
      PlannerOptions{options_.max_batch, options_.step_token_budget, options_.speculative, context}, *kv_);
  runner_ = std::make_unique<ModelRunner>(model_, cache_);
  output_ = std::make_unique<OutputStage>(context, *kv_, mutex_, stats_);
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
  if (model_.config().encoder) {
    reject();
    fail("{} is an encoder (an embedding model): it does not generate text; ask it for embeddings",
         model_.config().architecture);
  }
  return enqueue(std::make_unique<Sequence>(std::move(request)));
}

std::shared_ptr<RequestStream> Scheduler::submit(EmbeddingRequest request) {
  const std::size_t input = request.input.size();
  const std::size_t context = max_input_tokens(model_.config());
  auto reject = [&] {
    std::lock_guard lock(mutex_);
    ++stats_.requests_rejected;
  };
  if (input == 0) {
    reject();
    fail("the input is empty: at least one token is needed");
  }
  const int vocab = model_.config().vocab_size;
  for (int32_t id : request.input)
    if (id < 0 || id >= vocab) {
      reject();
      fail("input token id {} is outside the vocabulary (0..{})", id, vocab - 1);
    }
  if (context > 0 && input > context) {
    reject();
    fail("this model embeds inputs of at most {} tokens; the input has {}", context, input);
  }
  if (input > capacity_tokens()) {
    reject();
    fail("the input ({} tokens) can never fit the KV cache of {} tokens (raise --kv-tokens)", input, capacity_tokens());
  }
  GenerationRequest as_sequence;
  as_sequence.prompt = std::move(request.input);
  as_sequence.max_tokens = 0;
  as_sequence.deadline = request.deadline;
  auto seq = std::make_unique<Sequence>(std::move(as_sequence));
  seq->kind = Sequence::Kind::embed;
  return enqueue(std::move(seq));
}

std::shared_ptr<RequestStream> Scheduler::enqueue(std::unique_ptr<Sequence> seq) {
  const std::size_t prompt = seq->request.prompt.size();
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

void Scheduler::run_on_model(const std::function<void(Model&)>& task) {
  auto item = std::make_shared<ModelTask>();
  item->run = task;
  std::future<void> done = item->done.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) fail("the engine has stopped ({}): it runs nothing more", stop_reason_);
    model_tasks_.push_back(std::move(item));
  }
  wake_.notify_all();
  done.get();
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
    std::deque<std::shared_ptr<ModelTask>> tasks;
    {
      std::unique_lock lock(mutex_);
      if (stopping_) break;
      stats_.waiting += static_cast<int>(incoming_.size());
      while (!incoming_.empty()) {
        incoming_.front()->arrival = next_arrival_++;
        planner_->waiting().push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      tasks.swap(model_tasks_);
    }
    mark_progress();
    // Between two steps the model is free: run_on_model's tasks use it here, on this thread.
    for (auto& task : tasks) {
      try {
        task->run(model_);
        task->done.set_value();
      } catch (...) {
        task->done.set_exception(std::current_exception());
      }
    }
    bool worked = false;
    try {
      worked = step();
    } catch (const std::exception& e) {
      // A failed forward step: every sequence in flight gets the error; the engine keeps serving.
      std::string message = fmt::format("generation failed: {}", e.what());
      for (auto& seq : planner_->running()) output_->finish(*seq, FinishReason::error, message);
      planner_->running().clear();
    }
    mark_progress();
    publish_stats();
    if (!worked) {
      std::unique_lock lock(mutex_);
      // Wake for new work, a task on the model, a cancel, shutdown, or to check deadlines of queued requests.
      wake_.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return stopping_ || !incoming_.empty() || !model_tasks_.empty() || has_work_.load();
      });
      has_work_ = false;
    }
  }
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    reason = stop_reason_;
    while (!incoming_.empty()) {
      planner_->waiting().push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
    for (auto& task : model_tasks_)
      task->done.set_exception(std::make_exception_ptr(Error(fmt::format("the engine has stopped ({})", reason))));
    model_tasks_.clear();
  }
  for (auto& seq : planner_->running()) output_->finish(*seq, FinishReason::error, reason);
  for (auto& seq : planner_->waiting()) output_->finish(*seq, FinishReason::error, reason);
  planner_->running().clear();
  planner_->waiting().clear();
  publish_stats();
}

void Scheduler::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  std::erase_if(planner_->running(), [&](auto& seq) { return output_->end_if_left(*seq, now); });
  std::erase_if(planner_->waiting(), [&](auto& seq) { return output_->end_if_left(*seq, now); });
}

bool Scheduler::step() {
  drop_cancelled_and_expired();
  output_->admitted(planner_->admit());
  if (planner_->running().empty()) return false;

  const StepPlan plan = planner_->plan();
  if (plan.preemptions > 0) {
    std::lock_guard lock(mutex_);
    stats_.preemptions += plan.preemptions;
  }
  if (plan.chunks.empty()) return true;

  runner_->forward(plan);
  output_->begin_step(Clock::now());
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const PlannedChunk& chunk = plan.chunks[i];
    Sequence& seq = *chunk.seq;
    if (!chunk.draft.empty()) {
      output_->take(seq, runner_->sample(chunk, i));
      // The cache drops the positions of the refused part of the draft (they are overwritten
      // when the sequence grows).
      seq.kv.length = std::min(seq.kv.length, static_cast<int>(seq.tokens.size()) - 1);
      kv_->register_full_blocks(seq.tokens, seq.kv, seq.block_hashes);
      continue;
    }
    output_->count_prefill(chunk);
    if (seq.embeds()) {  // the whole input ran in this step
      output_->embedded(seq, runner_->embedding(chunk, i));
      continue;
    }
    kv_->register_full_blocks(seq.tokens, seq.kv, seq.block_hashes);
    if (seq.uncomputed() > 0) continue;  // mid-prompt chunk: its logits are not needed
    output_->take(seq, runner_->sample(chunk, i));
  }
  const std::vector<Sequence*> ended = output_->end_step(plan);
  if (!ended.empty())
    std::erase_if(planner_->running(), [&](auto& seq) {
      return std::find(ended.begin(), ended.end(), seq.get()) != ended.end();
    });
  return true;
}
std::vector<SequenceSnapshot> Scheduler::running_sequences() const {
  std::lock_guard lock(mutex_);
  return running_snapshot_;
}

void Scheduler::publish_stats() {
  const int cached_only = kv_->cached_only_blocks();
  const auto& running = planner_->running();
  std::vector<SequenceSnapshot> snapshot;
  snapshot.reserve(running.size());
  for (const auto& seq : running) {
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
  stats_.waiting = static_cast<int>(planner_->waiting().size());
  stats_.running = static_cast<int>(running.size());
  stats_.kv_blocks_cached = cached_only;
  stats_.kv_blocks_in_use = cache_.used_blocks() - cached_only;
}

}  // namespace inferlab
