// The continuous-batching scheduler on a real (small, random-weight) model: batched output equals
// one-sequence greedy generation; admission control, prefix caching, cancellation, timeouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/model.h"
#include "inferlab/model/make_model.h"
#include "inferlab/generation/scheduler.h"

namespace fs = std::filesystem;
using namespace inferlab;

namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("inferlab_scheduler_test_{}", ::getpid());
    auto [config, generation] = model_preset("llama-tiny");
    MakeModelOptions options;
    options.seed = 3;
    options.init_std = 0.5f;  // peaked logits: greedy ties are unlikely
    options.generation_config = std::make_shared<const nlohmann::json>(generation);
    write_random_model(config, dir_, options);
    model_ = Model::load(dir_.string(), LoadOptions{1}).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(dir_);
  }

  static std::vector<int32_t> prompt(int length, int salt) {
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) ids.push_back(3 + (i * 7 + salt * 13) % 500);
    return ids;
  }
  static std::vector<int32_t> reference(const std::vector<int32_t>& ids, int max_tokens) {
    GenerateOptions options;
    options.max_new_tokens = max_tokens;
    options.ignore_eos = true;
    return generate_greedy(*model_, ids, options).tokens;
  }
  static GenerationRequest greedy(std::vector<int32_t> ids, int max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(ids);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    return r;
  }
  struct Outcome {
    std::vector<int32_t> tokens;
    FinishReason finish = FinishReason::error;
    std::string error;  // with FinishReason::error: what went wrong
    RequestTimings timings;
  };
  static Outcome collect(RequestStream& stream) {
    Outcome out;
    for (;;)
      for (auto& event : stream.wait(std::chrono::milliseconds(100))) {
        if (event.token) out.tokens.push_back(event.token->token);
        if (event.finish) {
          out.finish = *event.finish;
          out.error = event.error;
          EXPECT_TRUE(event.timings) << "the last event carries the timings";
          if (event.timings) out.timings = *event.timings;
          return out;
        }
      }
  }

  // Stats are published after each engine step; a finished stream can be seen a moment before.
  static void wait_idle(Scheduler& scheduler) {
    for (int i = 0; i < 200 && !scheduler.idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  static fs::path dir_;
  static Model* model_;
};
fs::path SchedulerTest::dir_;
Model* SchedulerTest::model_ = nullptr;

TEST_F(SchedulerTest, BatchedGreedyEqualsOneSequenceAtATime) {
  SchedulerOptions options;
  options.max_batch = 8;
  options.kv_tokens = 2048;
  options.step_token_budget = 24;  // forces chunked prefill of the longer prompts
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(prompt(5 + i * 9, i));
  // Whether two sequences ever decode in one step depends on when the engine thread sees the
  // submissions: on a loaded machine (the whole suite beside a fuzzer) one round once ran them
  // one after another. Every round must give the reference tokens; one of three must batch.
  uint64_t batched = 0;
  for (int round = 0; round < 3 && batched == 0; ++round) {
    Scheduler scheduler(*model_, options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (auto& p : prompts) streams.push_back(scheduler.submit(greedy(p, 12)));
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      Outcome out = collect(*streams[i]);
      EXPECT_EQ(out.finish, FinishReason::length) << out.error;
      EXPECT_EQ(out.tokens, reference(prompts[i], 12)) << "prompt " << i;
    }
    wait_idle(scheduler);
    SchedulerStats stats = scheduler.stats();
    EXPECT_EQ(stats.generation_tokens, 8u * 12);
    batched = stats.batched_decode_steps;
  }
  EXPECT_GT(batched, 0u) << "no step decoded two sequences at once in three rounds";
}

// An embedding request beside generation: its input runs whole in one step even past the step's
// token budget (chunked prefill would split it), pooled as the model says (this decoder: the last
// token, normalized); the generation beside it is unchanged.
TEST_F(SchedulerTest, EmbeddingsRunWholeBesideGeneration) {
  auto embedding_alone = [&](const std::vector<int32_t>& ids) {
    KVCache cache(model_->config(), 256, 16);
    SequenceKV kv;
    EXPECT_TRUE(kv.reserve(cache, static_cast<int>(ids.size())));
    const BatchEntry entry{ids, &kv, EntryOutput::hidden_states};
    StepOutputs out;
    model_->forward_into(std::span<const BatchEntry>(&entry, 1), cache, out);
    const int h = model_->config().hidden_size;
    std::vector<float> last(out.hidden.end() - h, out.hidden.end());
    double norm = 0;
    for (float v : last) norm += static_cast<double>(v) * v;
    for (float& v : last) v = static_cast<float>(v / std::sqrt(norm));
    return last;
  };
  ASSERT_EQ(model_->config().pooling.kind, EmbeddingPooling::Kind::last);
  SchedulerOptions options;
  options.kv_tokens = 2048;
  options.step_token_budget = 24;
  Scheduler scheduler(*model_, options);
  const auto long_input = prompt(40, 2), short_input = prompt(6, 3), generated = prompt(30, 1);
  auto generation = scheduler.submit(greedy(generated, 12));
  auto long_stream = scheduler.submit(EmbeddingRequest{long_input, std::nullopt});
  auto short_stream = scheduler.submit(EmbeddingRequest{short_input, std::nullopt});
  for (auto [stream, input] : {std::pair{long_stream, long_input}, std::pair{short_stream, short_input}}) {
    std::vector<float> embedding;
    FinishReason finish = FinishReason::error;
    for (bool done = false; !done;)
      for (auto& event : stream->wait(std::chrono::milliseconds(100)))
        if (event.finish) {
          EXPECT_FALSE(event.token);
          finish = *event.finish;
          embedding = event.embedding;
          ASSERT_TRUE(event.timings);
          EXPECT_EQ(event.timings->prompt_tokens, static_cast<int>(input.size()));
          EXPECT_EQ(event.timings->generated_tokens, 0);
          done = true;
        }
    EXPECT_EQ(finish, FinishReason::stop);
    const std::vector<float> expected = embedding_alone(input);
    ASSERT_EQ(embedding.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(embedding[i], expected[i], 1e-5) << i;
  }
  Outcome out = collect(*generation);
  EXPECT_EQ(out.tokens, reference(generated, 12));
  wait_idle(scheduler);
  EXPECT_EQ(scheduler.stats().embedding_requests, 2u);
  EXPECT_EQ(scheduler.stats().embedding_tokens, 46u);
  // The generation's 42 tokens fill two blocks that stay cached; the 40-token input's two full
  // blocks are never offered to the prefix cache.
  EXPECT_EQ(scheduler.stats().kv_blocks_cached, 2);

  // What could never run is refused at once, naming why.
  EXPECT_THROW(scheduler.submit(EmbeddingRequest{{}, std::nullopt}), Error);
  EXPECT_THROW(scheduler.submit(EmbeddingRequest{prompt(model_->config().max_position_embeddings + 1, 4), std::nullopt}), Error);
  EXPECT_THROW(scheduler.submit(EmbeddingRequest{{-1}, std::nullopt}), Error);
}

TEST_F(SchedulerTest, RequestsWaitForKVBlocksInsteadOfFailing) {
  SchedulerOptions options;
  options.max_batch = 8;
  options.kv_tokens = 64;  // 4 blocks of 16: two of these sequences at most at once
  options.prefix_caching = false;
  Scheduler scheduler(*model_, options);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 5; ++i) {
    prompts.push_back(prompt(20, 100 + i));
    streams.push_back(scheduler.submit(greedy(prompts.back(), 20)));
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Outcome out = collect(*streams[i]);
    EXPECT_EQ(out.finish, FinishReason::length);
    EXPECT_EQ(out.tokens, reference(prompts[i], 20)) << "prompt " << i;
  }
  wait_idle(scheduler);
  EXPECT_EQ(scheduler.stats().kv_blocks_in_use, 0);
}

TEST_F(SchedulerTest, RefusesOnlyWhatCouldNeverFit) {
  SchedulerOptions options;
  options.kv_tokens = 64;
  Scheduler scheduler(*model_, options);
  EXPECT_THROW(scheduler.submit(greedy(prompt(60, 1), 10)), Error);
  EXPECT_THROW(scheduler.submit(greedy({}, 10)), Error);
  EXPECT_THROW(scheduler.submit(greedy({1, 100000}, 10)), Error);
  EXPECT_NO_THROW(collect(*scheduler.submit(greedy(prompt(50, 1), 10))));
}

TEST_F(SchedulerTest, SharedPrefixReusesBlocksAndGivesTheSameTokens) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  std::vector<int32_t> shared = prompt(40, 5);
  std::vector<int32_t> first = shared, second = shared;
  first.push_back(7);
  second.push_back(9);
  second.push_back(11);
  Outcome a = collect(*scheduler.submit(greedy(first, 8)));
  auto stream = scheduler.submit(greedy(second, 8));
  Outcome b = collect(*stream);
  EXPECT_EQ(stream->cached_prompt_tokens(), 32);  // two full blocks of 16
  wait_idle(scheduler);
  EXPECT_EQ(a.tokens, reference(first, 8));
  EXPECT_EQ(b.tokens, reference(second, 8));
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.prefix_cache_hit_tokens, 32u);
  EXPECT_EQ(stats.prefill_tokens, first.size() + second.size() - 32);
  EXPECT_EQ(stats.kv_blocks_in_use, 0);
  EXPECT_GT(stats.kv_blocks_cached, 0);
}

TEST_F(SchedulerTest, CancelFreesTheSlotAndBlocks) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  auto stream = scheduler.submit(greedy(prompt(30, 2), 400));
  // Wait for the first token, then go away.
  for (bool got = false; !got;)
    for (auto& e : stream->wait(std::chrono::milliseconds(100))) got = got || e.token.has_value();
  stream->cancel();
  Outcome out = collect(*stream);
  EXPECT_EQ(out.finish, FinishReason::cancelled);
  EXPECT_LT(out.tokens.size(), 400u);
  wait_idle(scheduler);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.kv_blocks_in_use, 0);
  EXPECT_EQ(stats.requests_finished[static_cast<int>(FinishReason::cancelled)], 1u);
}

// An event loop learns of new events through on_event instead of a thread waiting in wait(): the
// hook runs after each event is queued, so the events are there to take when it runs.
TEST_F(SchedulerTest, OnEventSignalsEventsAfterItIsSet) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  // Long enough that the hook is set while tokens are still coming (on a loaded machine the
  // sequence could otherwise end before on_event runs; that case is told apart below).
  auto stream = scheduler.submit(greedy(prompt(30, 2), 400));
  std::mutex mutex;
  std::vector<StreamEvent> received;
  int notified = 0, found_events = 0;
  auto take = [&] {
    auto events = stream->wait(std::chrono::milliseconds(0));
    for (auto& e : events) received.push_back(std::move(e));
    return !events.empty();
  };
  stream->on_event([&] {
    std::lock_guard lock(mutex);
    ++notified;
    found_events += take() ? 1 : 0;
  });
  bool finished_before_hook = false;
  {
    std::lock_guard lock(mutex);
    take();  // whatever came before the hook was set
    finished_before_hook = !received.empty() && received.back().finish.has_value();
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (bool done = false; !done && Clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    std::lock_guard lock(mutex);
    done = !received.empty() && received.back().finish.has_value();
  }
  wait_idle(scheduler);
  std::lock_guard lock(mutex);
  ASSERT_FALSE(received.empty());
  EXPECT_EQ(received.back().finish, FinishReason::length);
  if (!finished_before_hook) EXPECT_GE(notified, 1);
  // Each call finds its event queued (none was waiting in wait()); only the first may lose it to
  // the take() before the hook.
  EXPECT_GE(found_events, notified - 1);
  EXPECT_EQ(std::count_if(received.begin(), received.end(), [](const StreamEvent& e) { return e.token.has_value(); }), 400);
}


// A stop string matched by the server ends the sequence early: freed like a cancel, counted as a
// stop (the /metrics reason), even when the client's cancel follows before the engine's next step.
TEST_F(SchedulerTest, StopEndsEarlyAndCountsAsStop) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  auto stream = scheduler.submit(greedy(prompt(30, 4), 400));
  for (bool got = false; !got;)
    for (auto& e : stream->wait(std::chrono::milliseconds(100))) got = got || e.token.has_value();
  stream->stop();
  stream->cancel();
  Outcome out = collect(*stream);
  EXPECT_EQ(out.finish, FinishReason::stop);
  EXPECT_LT(out.tokens.size(), 400u);
  wait_idle(scheduler);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.kv_blocks_in_use, 0);
  EXPECT_EQ(stats.requests_finished[static_cast<int>(FinishReason::stop)], 1u);
  EXPECT_EQ(stats.requests_finished[static_cast<int>(FinishReason::cancelled)], 0u);
}
TEST_F(SchedulerTest, RunningSequencesShowTheBatchAsItRuns) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  options.block_size = 16;
  Scheduler scheduler(*model_, options);
  const Clock::time_point before = Clock::now();
  auto stream = scheduler.submit(greedy(prompt(30, 2), 400));
  for (bool got = false; !got;)
    for (auto& e : stream->wait(std::chrono::milliseconds(100))) got = got || e.token.has_value();
  // The engine publishes after each step: wait for one that shows the first token.
  std::vector<SequenceSnapshot> rows;
  for (int i = 0; i < 200 && (rows.empty() || !rows[0].first_token); ++i) {
    rows = scheduler.running_sequences();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(rows.size(), 1u);
  const SequenceSnapshot& row = rows[0];
  EXPECT_EQ(row.prompt_tokens, 30);
  EXPECT_EQ(row.max_tokens, 400);
  EXPECT_GE(row.generated_tokens, 1);
  EXPECT_GE(row.computed_tokens, 30);
  EXPECT_GE(row.kv_blocks * 16, row.computed_tokens);  // its blocks hold every computed position
  EXPECT_GE(row.arrival, before);
  ASSERT_TRUE(row.scheduled && row.first_token);
  EXPECT_LE(row.arrival, *row.scheduled);
  EXPECT_LE(*row.scheduled, *row.first_token);
  stream->cancel();
  collect(*stream);
  wait_idle(scheduler);
  for (int i = 0; i < 200 && !scheduler.running_sequences().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(scheduler.running_sequences().empty());
}

TEST_F(SchedulerTest, DeadlineEndsARequestWithTimeout) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  GenerationRequest r = greedy(prompt(10, 3), 400);
  r.deadline = Clock::now();  // already due: no timing race with a fast model

  Outcome out = collect(*scheduler.submit(std::move(r)));
  EXPECT_EQ(out.finish, FinishReason::timeout);
}

TEST_F(SchedulerTest, StopTokenFinishesWithStop) {
  SchedulerOptions options;
  Scheduler scheduler(*model_, options);
  std::vector<int32_t> p = prompt(12, 4);
  std::vector<int32_t> expected = reference(p, 6);
  GenerationRequest r = greedy(p, 20);
  r.stop_token_ids = {expected[3]};
  Outcome out = collect(*scheduler.submit(std::move(r)));
  EXPECT_EQ(out.finish, FinishReason::stop);
  auto first = std::find(expected.begin(), expected.end(), expected[3]);
  EXPECT_EQ(out.tokens, std::vector<int32_t>(expected.begin(), first + 1));
}

TEST_F(SchedulerTest, SeededSamplingIsReproducibleInABatch) {
  SchedulerOptions options;
  Scheduler scheduler(*model_, options);
  auto sampled = [&](uint64_t seed) {
    GenerationRequest r = greedy(prompt(9, 6), 16);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    return scheduler.submit(std::move(r));
  };
  auto a = sampled(11), b = sampled(11), c = sampled(12);
  auto ta = collect(*a).tokens, tb = collect(*b).tokens, tc = collect(*c).tokens;
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST_F(SchedulerTest, ShutdownEndsEverythingWithAnError) {
  SchedulerOptions options;
  auto scheduler = std::make_unique<Scheduler>(*model_, options);
  auto stream = scheduler->submit(greedy(prompt(10, 8), 400));
  scheduler->shutdown("going away");
  Outcome out = collect(*stream);
  EXPECT_EQ(out.finish, FinishReason::error);
  EXPECT_THROW(scheduler->submit(greedy(prompt(10, 8), 4)), OverloadedError);
}

// run_on_model: a forward pass of its own on the scheduler's model, on the engine thread, while a
// request runs: the pass gives the model's answer and the request's tokens are unchanged.
TEST_F(SchedulerTest, RunOnModelSharesTheModelBetweenSteps) {
  const std::vector<int32_t> running_prompt = prompt(12, 9), own_prompt = prompt(7, 10);
  const std::vector<int32_t> running_expected = reference(running_prompt, 40);  // before the engine thread uses the model
  const int32_t own_expected = reference(own_prompt, 1).front();
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  auto stream = scheduler.submit(greedy(running_prompt, 40));
  std::thread::id ran_on;
  std::vector<float> logits;
  scheduler.run_on_model([&](Model& model) {
    ran_on = std::this_thread::get_id();
    KVCache cache(model.config(), 64, 16, KVType::F32, model.backend());
    SequenceKV seq;
    ASSERT_TRUE(seq.reserve(cache, static_cast<int>(own_prompt.size())));
    BatchEntry entry{own_prompt, &seq, EntryOutput::last_logits};
    model.forward_into(std::span<const BatchEntry>(&entry, 1), cache, logits);
    seq.release(cache);
  });
  EXPECT_NE(ran_on, std::this_thread::get_id()) << "the task runs on the engine thread";
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(model_->config().vocab_size));
  const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(next, own_expected);
  EXPECT_EQ(collect(*stream).tokens, running_expected);

  EXPECT_THROW(scheduler.run_on_model([](Model&) { fail("refused by the task"); }), Error);
  scheduler.shutdown("going away");
  EXPECT_THROW(scheduler.run_on_model([](Model&) {}), Error);
}

}  // namespace

// What every finished sequence's timings must satisfy (docs/measurement.md).
static void expect_consistent(const RequestTimings& t, int prompt_tokens, int generated) {
  EXPECT_EQ(t.prompt_tokens, prompt_tokens);
  EXPECT_EQ(t.generated_tokens, generated);
  ASSERT_EQ(t.token_ms.size(), static_cast<std::size_t>(generated));
  for (std::size_t i = 1; i < t.token_ms.size(); ++i) EXPECT_GT(t.token_ms[i], t.token_ms[i - 1]) << i;
  EXPECT_GE(t.queue_ms, 0);
  EXPECT_GE(t.prefill_ms, 0);
  EXPECT_GE(t.decode_ms, 0);
  EXPECT_NEAR(t.token_ms.front(), t.ttft_ms(), 1e-6);  // the first token ends the prefill
  EXPECT_LE(t.token_ms.back(), t.e2e_ms() + 1e-6);
  EXPECT_GT(t.arrival_unix_ms, 1'600'000'000'000);  // the system clock, in ms
}

TEST_F(SchedulerTest, TimingsStagesAddUpAndAWaitingRequestQueues) {
  SchedulerOptions options;
  options.max_batch = 1;  // the second request waits for the first to finish
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  auto first = scheduler.submit(greedy(prompt(20, 5), 10));
  auto second = scheduler.submit(greedy(prompt(12, 6), 6));
  Outcome a = collect(*first), b = collect(*second);
  expect_consistent(a.timings, 20, 10);
  expect_consistent(b.timings, 12, 6);
  EXPECT_EQ(a.timings.preemptions, 0);
  // The second was admitted only once the first had finished (ms system clock: 2 ms of rounding).
  EXPECT_GE(b.timings.arrival_unix_ms + b.timings.queue_ms, a.timings.arrival_unix_ms + a.timings.e2e_ms() - 2);
  EXPECT_GT(b.timings.queue_ms, 0);
  wait_idle(scheduler);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.queue_time.count, 2u);
  EXPECT_EQ(stats.prefill_time.count, 2u);
  EXPECT_EQ(stats.decode_time.count, 2u);
  EXPECT_NEAR(stats.queue_time.sum + stats.prefill_time.sum + stats.decode_time.sum, stats.e2e_latency.sum, 1e-9);
}

TEST_F(SchedulerTest, TimingsCountCachedPromptTokens) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  const auto ids = prompt(40, 9);  // two full blocks of 16 can come from the cache
  Outcome cold = collect(*scheduler.submit(greedy(ids, 3)));
  Outcome warm = collect(*scheduler.submit(greedy(ids, 3)));
  EXPECT_EQ(cold.timings.cached_tokens, 0);
  EXPECT_EQ(warm.timings.cached_tokens, 32);
  expect_consistent(warm.timings, 40, 3);
}

TEST_F(SchedulerTest, TimingsCountPreemptionsOfTheSequence) {
  SchedulerOptions options;
  options.max_batch = 2;
  options.kv_tokens = 64;  // 4 blocks: two sequences growing to 56 tokens cannot both stay
  options.prefix_caching = false;
  const auto pa = prompt(16, 21), pb = prompt(16, 22);
  // A preemption needs both sequences in the batch at once. On a loaded machine the engine
  // thread can finish the first alone before the second is submitted, so the scenario is
  // repeated (a fresh scheduler each time) until one run preempted; every run must add up.
  uint64_t total = 0;
  for (int attempt = 0; attempt < 20 && total == 0; ++attempt) {
    Scheduler scheduler(*model_, options);
    auto a_stream = scheduler.submit(greedy(pa, 40));
    auto b_stream = scheduler.submit(greedy(pb, 40));
    Outcome a = collect(*a_stream), b = collect(*b_stream);
    EXPECT_EQ(a.tokens, reference(pa, 40)) << "recomputed after preemption, same tokens";
    EXPECT_EQ(b.tokens, reference(pb, 40)) << "recomputed after preemption, same tokens";
    expect_consistent(a.timings, 16, 40);
    expect_consistent(b.timings, 16, 40);
    wait_idle(scheduler);
    total = scheduler.stats().preemptions;
    EXPECT_EQ(static_cast<uint64_t>(a.timings.preemptions + b.timings.preemptions), total);
  }
  EXPECT_GT(total, 0u) << "20 runs of two sequences over-filling the KV cache never preempted";
}

TEST_F(SchedulerTest, TimingsOfACancelledRequestStillAddUp) {
  SchedulerOptions options;
  options.kv_tokens = 1024;
  Scheduler scheduler(*model_, options);
  auto stream = scheduler.submit(greedy(prompt(10, 30), 500));
  for (bool got = false; !got;)
    for (auto& event : stream->wait(std::chrono::milliseconds(100))) got = got || event.token.has_value();
  stream->cancel();
  Outcome out = collect(*stream);
  EXPECT_EQ(out.finish, FinishReason::cancelled);
  EXPECT_GE(out.timings.generated_tokens, 1);
  EXPECT_EQ(out.timings.token_ms.size(), static_cast<std::size_t>(out.timings.generated_tokens));
  EXPECT_LE(out.timings.token_ms.back(), out.timings.e2e_ms() + 1e-6);
}

// Prompt lookup on prompts that repeat themselves: greedy output token for token as without
// speculation (in the scheduler, batched, and in generate_greedy), with drafts really kept.
TEST_F(SchedulerTest, SpeculativeGreedyEqualsPlainDecoding) {
  SchedulerOptions options;
  options.max_batch = 4;
  options.kv_tokens = 4096;
  options.speculative.method = "ngram";
  options.speculative.draft_max = 5;
  Scheduler scheduler(*model_, options);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> base = prompt(6 + i, i), repeated;
    for (int r = 0; r < 3; ++r) repeated.insert(repeated.end(), base.begin(), base.end());
    prompts.push_back(repeated);
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& p : prompts) streams.push_back(scheduler.submit(greedy(p, 40)));
  int drafted = 0, accepted = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Outcome out = collect(*streams[i]);
    EXPECT_EQ(out.finish, FinishReason::length);
    EXPECT_EQ(out.tokens, reference(prompts[i], 40)) << "prompt " << i;
    EXPECT_EQ(out.timings.generated_tokens, 40);
    drafted += out.timings.draft_tokens;
    accepted += out.timings.accepted_draft_tokens;
  }
  EXPECT_GT(accepted, 0) << "no draft was ever kept: the test would not see a verification bug";
  wait_idle(scheduler);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.draft_tokens, static_cast<uint64_t>(drafted));
  EXPECT_EQ(stats.accepted_draft_tokens, static_cast<uint64_t>(accepted));
  EXPECT_EQ(stats.kv_blocks_in_use, 0) << "drafted positions' blocks are given back with the sequence";
  EXPECT_LT(stats.decode_steps, 6u * 39) << "accepted drafts save steps";

  for (const auto& p : prompts) {
    GenerateOptions plain, fast;
    plain.max_new_tokens = fast.max_new_tokens = 40;
    plain.ignore_eos = fast.ignore_eos = true;
    fast.speculative = options.speculative;
    GenerateResult a = generate_greedy(*model_, p, plain), b = generate_greedy(*model_, p, fast);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_LE(b.forward_passes, a.forward_passes);
  }
}

// Sampling with speculation draws from the same distribution: the tokens of many seeded requests
// with and without it, compared position by position with a chi-square two-sample test.
TEST_F(SchedulerTest, SpeculativeSamplingKeepsTheDistribution) {
  std::vector<int32_t> base = prompt(5, 9), repeated;
  for (int r = 0; r < 4; ++r) repeated.insert(repeated.end(), base.begin(), base.end());
  const int requests = 400, length = 8;
  auto sample_all = [&](bool speculative) {
    SchedulerOptions options;
    options.max_batch = 16;
    options.kv_tokens = 8192;
    if (speculative) options.speculative.method = "ngram";
    Scheduler scheduler(*model_, options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < requests; ++i) {
      GenerationRequest r = greedy(repeated, length);
      // The prompt's own tokens biased up: the output keeps to them, so drafts copied from the
      // prompt are kept often and refused often (both branches of the rule are exercised).
      r.sampling.temperature = 1.0f;
      for (int32_t t : base) r.sampling.logit_bias[t] = 8.0f;
      r.sampling.seed = 1000 + i;
      streams.push_back(scheduler.submit(std::move(r)));
    }
    std::vector<std::vector<int32_t>> out;
    int accepted = 0, drafted = 0;
    for (auto& s : streams) {
      Outcome o = collect(*s);
      out.push_back(o.tokens);
      accepted += o.timings.accepted_draft_tokens;
      drafted += o.timings.draft_tokens;
    }
    if (speculative) {
      EXPECT_GT(accepted, 0);
      EXPECT_LT(accepted, drafted) << "some drafts must be refused, or the residual draw goes untested";
    }
    return out;
  };
  auto plain = sample_all(false), spec = sample_all(true);
  for (int position = 0; position < length; ++position) {
    std::map<int32_t, std::pair<int, int>> counts;
    for (int i = 0; i < requests; ++i) {
      ++counts[plain[i][position]].first;
      ++counts[spec[i][position]].second;
    }
    // Tokens seen fewer than 10 times in all are pooled into one category.
    double chi2 = 0;
    int categories = 0;
    std::pair<int, int> rare{0, 0};
    auto add = [&](std::pair<int, int> c) {
      const double total = c.first + c.second, expected = total / 2;
      chi2 += (c.first - expected) * (c.first - expected) / expected + (c.second - expected) * (c.second - expected) / expected;
      ++categories;
    };
    for (auto& [token, c] : counts) {
      if (c.first + c.second < 10) rare = {rare.first + c.first, rare.second + c.second};
      else add(c);
    }
    if (rare.first + rare.second > 0) add(rare);
    const int df = std::max(1, categories - 1);
    // The 1e-4 upper quantile of chi-square(df) (Wilson-Hilferty, z = 3.719): a real difference in
    // distribution shows as a far larger statistic; chance alone passes 9,999 times in 10,000.
    const double z = 3.719, a = 2.0 / (9.0 * df);
    const double critical = df * std::pow(1 - a + z * std::sqrt(a), 3);
    EXPECT_LT(chi2, critical) << "position " << position << ": " << categories << " categories";
  }
}

// The default KV capacity is a byte budget (near 1 GiB, at least one context): f16 elements hold
// twice the tokens of f32 in it.
TEST(DefaultKvTokens, HalfPrecisionHoldsTwiceTheTokensInTheBudget) {
  ModelConfig config;
  config.num_layers = 24, config.num_kv_heads = 8, config.head_dim = 128, config.max_position_embeddings = 2048;
  const std::size_t f32 = default_kv_tokens(config, 32, KVType::F32), f16 = default_kv_tokens(config, 32, KVType::F16);
  EXPECT_EQ(f32, (std::size_t{1} << 30) / kv_bytes_per_token(config, 4));  // 5,461: the budget binds
  EXPECT_EQ(f16, (std::size_t{1} << 30) / kv_bytes_per_token(config, 2));
  EXPECT_EQ(default_kv_tokens(config, 1, KVType::F16), 2048u);  // one context is enough for one sequence
}
