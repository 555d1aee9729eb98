// Our Sampler against reference implementations, row by row (sampler_vs_llama_cpp.sh and
// typical_p_vs_transformers.sh run it):
//   sampler_reference_check llama REFERENCE.txt MODEL.gguf   what llama_cpp_samplers printed
//   sampler_reference_check transformers REFERENCE.txt       what typical_p_transformers.py printed
// Each case must keep the same tokens with probabilities within 1e-6 (DRY: change the same logits to
// within 1e-6 relative). Prints the first mismatches and a summary; exit 1 on any mismatch.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "inferlab/generation/sampler.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "sampler_reference_cases.h"

using namespace inferlab;
using sampler_cases::Kind;

namespace {

constexpr double kTolerance = 1e-6;
int mismatches = 0;

void report(const std::string& what) {
  if (++mismatches <= 10) std::cerr << "MISMATCH " << what << "\n";
}

// Compares kept sets and probabilities; `ours` is by id.
void compare_distribution(const std::string& label, const std::vector<double>& ours, const std::map<int32_t, double>& reference) {
  std::size_t kept = 0;
  for (std::size_t id = 0; id < ours.size(); ++id) {
    if (ours[id] <= 0.0) continue;
    ++kept;
    auto it = reference.find(static_cast<int32_t>(id));
    if (it == reference.end()) return report(label + ": we keep token " + std::to_string(id) + " (p " + std::to_string(ours[id]) + "), the reference does not");
    if (std::abs(it->second - ours[id]) > kTolerance)
      return report(label + ": token " + std::to_string(id) + " p " + std::to_string(ours[id]) + " vs " + std::to_string(it->second));
  }
  if (kept != reference.size())
    report(label + ": we keep " + std::to_string(kept) + " tokens, the reference " + std::to_string(reference.size()));
}

int check_llama(const char* reference_path, const char* model_path) {
  std::ifstream in(reference_path);
  std::string line, word;
  std::getline(in, line);
  std::istringstream head(line);
  int count = 0;
  head >> word >> count;
  if (word != "alphabet") {
    std::cerr << "no alphabet line in " << reference_path << "\n";
    return 1;
  }
  std::vector<int32_t> alphabet(static_cast<std::size_t>(count));
  for (int32_t& id : alphabet) head >> id;
  auto tokenizer = Tokenizer::from_gguf(model_path);
  const int vocab = tokenizer->vocab_size();
  std::map<std::string, std::vector<DryBreaker>> breakers_of;  // by the joined breaker strings
  std::map<Kind, int> cases_of;
  int kept_one = 0, kept_all = 0, dry_penalised = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    int index = 0;
    std::size_t size = 0;
    row >> word >> index >> word >> size;
    const sampler_cases::Case c = sampler_cases::make_case(index, alphabet, vocab);
    const std::string label = "case " + std::to_string(index);
    ++cases_of[c.kind];
    SamplingParams params;
    params.seed = 1;
    params.top_k = c.top_k;
    params.typical_p = c.typical_p;
    params.top_p = c.top_p;
    params.min_p = c.min_p;
    params.xtc_probability = c.xtc_probability;
    params.xtc_threshold = c.xtc_threshold;
    if (c.kind == Kind::dry) {
      params.dry_multiplier = c.dry_multiplier;
      params.dry_base = c.dry_base;
      params.dry_allowed_length = c.dry_allowed_length;
      params.dry_penalty_last_n = c.dry_penalty_last_n;
      std::string key;
      for (const std::string& b : c.dry_breakers) key += b + '\x1f';
      auto it = breakers_of.find(key);
      if (it == breakers_of.end()) {
        auto text = [&](int32_t id) { return tokenizer->decode_bytes(std::span<const int32_t>(&id, 1), false); };
        auto tokenize = [&](const std::string& s) { return tokenizer->encode(s, false); };
        it = breakers_of.emplace(key, dry_breaker_sequences(c.dry_breakers, vocab, text, tokenize)).first;
      }
      params.dry_breakers = it->second;
      Sampler sampler(params, c.history);
      const std::vector<float> adjusted = sampler.adjusted_logits(c.logits);
      std::map<int32_t, float> changed;
      for (std::size_t i = 0; i < size; ++i) {
        int32_t id = 0;
        float logit = 0.0f;
        row >> id >> logit;
        changed[id] = logit;
      }
      dry_penalised += !changed.empty();
      std::size_t ours_changed = 0;
      for (std::size_t id = 0; id < adjusted.size(); ++id) {
        if (adjusted[id] == c.logits[id]) continue;
        ++ours_changed;
        auto ref = changed.find(static_cast<int32_t>(id));
        if (ref == changed.end()) {
          report(label + " (DRY): we penalise token " + std::to_string(id) + ", llama.cpp does not");
          break;
        }
        if (std::abs(ref->second - adjusted[id]) > kTolerance * std::max(1.0f, std::abs(ref->second))) {
          report(label + " (DRY): token " + std::to_string(id) + " logit " + std::to_string(adjusted[id]) + " vs " + std::to_string(ref->second));
          break;
        }
      }
      if (ours_changed != changed.size())
        report(label + " (DRY): we change " + std::to_string(ours_changed) + " logits, llama.cpp " + std::to_string(changed.size()));
      continue;
    }
    std::map<int32_t, double> reference;
    for (std::size_t i = 0; i < size; ++i) {
      int32_t id = 0;
      double p = 0.0;
      row >> id >> p;
      reference[id] = p;
    }
    kept_one += size == 1;
    kept_all += size == c.logits.size();
    Sampler sampler(params);
    compare_distribution(label, sampler.distribution(c.logits), reference);
  }
  std::printf("llama.cpp: %d typical, %d xtc, %d chain, %d dry cases (%d with a DRY penalty; %d rows kept one token, %d all); %d mismatches\n",
              cases_of[Kind::typical], cases_of[Kind::xtc], cases_of[Kind::chain], cases_of[Kind::dry], dry_penalised, kept_one,
              kept_all, mismatches);
  const int total = cases_of[Kind::typical] + cases_of[Kind::xtc] + cases_of[Kind::chain] + cases_of[Kind::dry];
  if (total == 0 || dry_penalised == 0) {
    std::cerr << "the reference output has no cases (or no DRY case penalised anything)\n";
    return 1;
  }
  return mismatches == 0 ? 0 : 1;
}

// Lines: "T typical_p V logit_1..logit_V p_1..p_V" (transformers' probabilities after
// TemperatureLogitsWarper and TypicalLogitsWarper).
int check_transformers(const char* reference_path) {
  std::ifstream in(reference_path);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    float temperature = 1.0f, typical_p = 1.0f;
    std::size_t vocab = 0;
    row >> temperature >> typical_p >> vocab;
    std::vector<float> logits(vocab);
    for (float& x : logits) row >> x;
    std::map<int32_t, double> reference;
    for (std::size_t id = 0; id < vocab; ++id) {
      double p = 0.0;
      row >> p;
      if (p > 0.0) reference[static_cast<int32_t>(id)] = p;
    }
    if (!row) {
      std::cerr << "unreadable row " << rows << "\n";
      return 1;
    }
    SamplingParams params;
    params.seed = 1;
    params.temperature = temperature;
    params.typical_p = typical_p;
    Sampler sampler(params);
    compare_distribution("row " + std::to_string(rows), sampler.distribution(logits), reference);
    ++rows;
  }
  std::printf("transformers TypicalLogitsWarper: %d rows, %d mismatches\n", rows, mismatches);
  return rows > 0 && mismatches == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "llama" && argc == 4) return check_llama(argv[2], argv[3]);
  if (mode == "transformers" && argc == 3) return check_transformers(argv[2]);
  std::fprintf(stderr, "usage: sampler_reference_check llama REFERENCE MODEL.gguf | transformers REFERENCE\n");
  return 2;
}
