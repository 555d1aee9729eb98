#include "inferlab/bench/latency.h"

#include <algorithm>
#include <chrono>

#include "inferlab/util/error.h"
#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/model.h"
#include "inferlab/util/stats.h"

namespace inferlab::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

using lab::fit_line;
using lab::LatencyPoint;
using lab::LatencySweep;

LatencySweep measure_latency(Model& model, const LatencyOptions& options) {
  const ModelConfig& config = model.config();
  if (options.lengths.size() < 2) fail("--lengths: give at least two input lengths for the fit");
  if (options.gen_len < 2) fail("--gen-len must be at least 2 (prefill and decode are split), got {}", options.gen_len);
  if (options.repeat < 1) fail("--repeat must be at least 1, got {}", options.repeat);
  if (options.token_id < 0 || options.token_id >= config.vocab_size)
    fail("--token-id {} is outside the vocabulary (0..{})", options.token_id, config.vocab_size - 1);
  for (int length : options.lengths) {
    if (length <= 0) fail("--lengths: {} is not a positive length", length);
    if (config.max_position_embeddings > 0 && length + options.gen_len > config.max_position_embeddings)
      fail("--lengths: {} input + {} generated tokens exceed the model's context of {} positions", length,
           options.gen_len, config.max_position_embeddings);
  }
  GenerateOptions generate;
  generate.max_new_tokens = options.gen_len;
  generate.ignore_eos = true;  // the output length is what the experiment holds fixed
  std::vector<Clock::time_point> token_times;
  generate.on_token = [&](int32_t) { token_times.push_back(Clock::now()); };

  // One untimed generation first: page in the weights, start thread pools.
  {
    std::vector<int32_t> ids(options.lengths.front(), options.token_id);
    generate_greedy(model, ids, generate);
  }
  LatencySweep sweep;
  for (int length : options.lengths) {
    std::vector<int32_t> ids(length, options.token_id);
    std::vector<double> totals, prefills, decodes;
    for (int r = 0; r < options.repeat; ++r) {
      prompt_logits(model, ids);  // the course's warm-up forward before each timed run
      token_times.clear();
      auto start = Clock::now();
      GenerateResult result = generate_greedy(model, ids, generate);
      auto end = Clock::now();
      if (static_cast<int>(result.tokens.size()) != options.gen_len || token_times.size() != result.tokens.size())
        fail("generation stopped after {} of {} tokens", result.tokens.size(), options.gen_len);
      totals.push_back(seconds(end - start));
      prefills.push_back(seconds(token_times.front() - start));
      decodes.push_back(seconds(token_times.back() - token_times.front()) / (options.gen_len - 1));
    }
    LatencyPoint p;
    p.input_len = length;
    p.latency_s = median(totals);
    p.prefill_s = median(prefills);
    p.decode_s_per_token = median(decodes);
    p.samples_s = totals;
    sweep.points.push_back(std::move(p));
    if (options.on_length_done) options.on_length_done(length);
  }
  std::vector<double> x, y, prefill;
  for (const auto& p : sweep.points) {
    x.push_back(p.input_len);
    y.push_back(p.latency_s);
    prefill.push_back(p.prefill_s);
  }
  sweep.fit = fit_line(x, y);
  sweep.prefill_fit = fit_line(x, prefill);
  return sweep;
}

}  // namespace inferlab::bench
