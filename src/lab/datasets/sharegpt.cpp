// --dataset sharegpt-json: the first human turn of ShareGPT conversations (--dataset-path), as
// vLLM's benchmark samples them.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {

std::vector<BenchPrompt> sharegpt_prompts(const std::string& path, int count, int output_len, uint64_t seed,
                                          const TextTokenizer* tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--dataset-path {}: cannot open", path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_array()) fail("--dataset-path {}: expected a ShareGPT JSON array", path);
  if (output_len <= 0 && !tokenizer)
    fail("the sharegpt dataset takes each reply's length as max_tokens, which needs a tokenizer "
         "(--tokenizer); or give --output-len");
  std::vector<BenchPrompt> pool;
  for (const auto& entry : j) {
    if (!entry.is_object() || !entry.contains("conversations") || !entry["conversations"].is_array()) continue;
    const auto& turns = entry["conversations"];
    if (turns.size() < 2 || !turns[0].is_object() || !turns[1].is_object()) continue;
    if (!turns[0].contains("value") || !turns[0]["value"].is_string()) continue;
    if (!turns[1].contains("value") || !turns[1]["value"].is_string()) continue;
    BenchPrompt p;
    p.text = turns[0]["value"];
    if (tokenizer) {
      auto in_len = static_cast<int64_t>(tokenizer->encode(p.text).size());
      auto reply_len = static_cast<int64_t>(tokenizer->encode(turns[1]["value"].get<std::string>()).size());
      // vLLM's pruning: too short to measure, or too long for common context lengths.
      if (in_len < 4 || (output_len <= 0 && reply_len < 4) || in_len > 1024 || in_len + reply_len > 2048) continue;
      p.input_tokens = in_len;
      p.output_len = output_len > 0 ? output_len : static_cast<int>(reply_len);
    } else {
      if (p.text.empty()) continue;
      p.output_len = output_len;
    }
    pool.push_back(std::move(p));
  }
  if (pool.empty()) fail("--dataset-path {}: no usable conversation (need a human turn followed by a reply)", path);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(pool[i % pool.size()]);
  return prompts;
}

std::vector<BenchPrompt> sharegpt_dataset(const DatasetRequest& r) {
  return sharegpt_prompts(r.path, r.count, r.output_len, r.seed, r.tokenizer);
}

}  // namespace inferlab::lab
