#include "inferlab/bench/accuracy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/model.h"
#include "inferlab/util/error.h"

namespace inferlab::bench {
namespace {

std::unique_ptr<Model> load_with(const std::string& model, const std::string& weights, int threads) {
  LoadOptions options;
  options.threads = threads;
  options.weights = weights;
  return Model::load(model, options);
}

}  // namespace

AccuracyReport measure_accuracy(const AccuracyOptions& args) {
  if (args.prompt_len <= 0 || args.steps < 0) fail("bench accuracy: --prompt-len must be positive and --steps >= 0");
  AccuracyReport report;
  report.options = args;
  auto reference = load_with(args.model, "f32", args.threads);
  const ModelConfig& c = reference->config();
  std::mt19937 rng(args.seed);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  std::vector<int32_t> prompt(args.prompt_len);
  for (auto& t : prompt) t = token(rng);
  GenerateOptions gen;
  gen.max_new_tokens = args.steps;
  gen.ignore_eos = true;
  const std::vector<float> ref_logits = prompt_logits(*reference, prompt);
  const std::vector<int32_t> ref_tokens = generate_greedy(*reference, prompt, gen).tokens;
  const std::size_t vocab = c.vocab_size;
  reference.reset();
  for (float v : ref_logits) report.max_abs_logit = std::max(report.max_abs_logit, static_cast<double>(std::fabs(v)));
  for (const std::string& format : args.formats) {
    auto model = load_with(args.model, format, args.threads);
    const std::vector<float> logits = prompt_logits(*model, prompt);
    FormatAccuracy row{format};
    double sq = 0;
    for (int p = 0; p < args.prompt_len; ++p) {
      const std::span<const float> a(&ref_logits[p * vocab], vocab), b(&logits[p * vocab], vocab);
      for (std::size_t i = 0; i < vocab; ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        row.max_abs_logit_diff = std::max(row.max_abs_logit_diff, d);
        sq += d * d;
      }
      row.prompt_top1_agree += argmax(a) == argmax(b);
    }
    const std::vector<int32_t> tokens = generate_greedy(*model, prompt, gen).tokens;
    for (std::size_t i = 0; i < tokens.size() && i < ref_tokens.size(); ++i) {
      if (tokens[i] == ref_tokens[i]) ++row.greedy_equal;
      else if (row.first_divergence < 0) row.first_divergence = static_cast<int>(i);
    }
    row.rms_logit_diff = std::sqrt(sq / (static_cast<double>(args.prompt_len) * vocab));
    report.formats.push_back(std::move(row));
  }
  return report;
}

std::string accuracy_text(const AccuracyReport& r) {
  const AccuracyOptions& o = r.options;
  std::string text = fmt::format("{}: {} prompt positions (seed {}), {} greedy steps; reference: the same model at f32\n\n",
                                 o.model, o.prompt_len, o.seed, o.steps);
  text += "| weights | max abs logit diff | of max abs logit | rms diff | prompt top-1 agree | greedy tokens equal | first divergence |\n";
  text += "|---|---|---|---|---|---|---|\n";
  for (const FormatAccuracy& f : r.formats)
    text += fmt::format("| {} | {:.3g} | {:.2g} | {:.3g} | {}/{} | {}/{} | {} |\n", f.weights, f.max_abs_logit_diff,
                        f.max_abs_logit_diff / r.max_abs_logit, f.rms_logit_diff, f.prompt_top1_agree, o.prompt_len,
                        f.greedy_equal, o.steps, f.first_divergence < 0 ? std::string("none") : std::to_string(f.first_divergence));
  return text;
}

nlohmann::json accuracy_json(const AccuracyReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const FormatAccuracy& f : r.formats)
    rows.push_back({{"weights", f.weights}, {"max_abs_logit_diff", f.max_abs_logit_diff}, {"max_abs_logit", r.max_abs_logit},
                    {"rms_logit_diff", f.rms_logit_diff}, {"prompt_top1_agree", f.prompt_top1_agree},
                    {"prompt_positions", r.options.prompt_len}, {"greedy_equal", f.greedy_equal},
                    {"greedy_steps", r.options.steps}, {"first_divergence", f.first_divergence}});
  return {{"model", r.options.model}, {"results", rows}};
}

}  // namespace inferlab::bench
