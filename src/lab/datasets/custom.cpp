// --dataset custom: vLLM's custom JSONL, one request a line: {"prompt": "...", "output_tokens": 10}.
// "output_tokens" (max_tokens) may be left out when --output-len is given, which then wins, as
// vLLM's --custom-output-len does. Lines are shuffled with the seed and cycled when fewer than
// --num-requests.
#include <algorithm>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/util/error.h"
#include "lab/datasets/dataset_file.h"
#include "lab/datasets/random_text.h"

namespace inferlab::lab {

std::vector<BenchPrompt> custom_dataset(const DatasetRequest& r) {
  std::vector<BenchPrompt> pool;
  for (const JsonRecord& record : read_jsonl(r.path)) {
    BenchPrompt p;
    p.text = string_field(record.value, "prompt", r.path, record.line);
    if (p.text.empty()) fail_at(r.path, record.line, "\"prompt\" is empty");
    const bool has_output = record.value.contains("output_tokens");
    if (has_output) {
      const int given = positive_int_field(record.value, "output_tokens", r.path, record.line);  // checked even when overridden
      p.output_len = r.output_len > 0 ? r.output_len : given;
    } else if (r.output_len > 0) {
      p.output_len = r.output_len;
    } else {
      fail_at(r.path, record.line, "\"output_tokens\" is missing and no --output-len was given");
    }
    p.input_tokens = count_tokens(p.text, r.tokenizer);
    pool.push_back(std::move(p));
  }
  if (pool.empty()) fail("--dataset-path {}: no request (expected one JSON object a line, {{\"prompt\": ...}})", r.path);
  std::mt19937_64 rng(r.seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < r.count; ++i) prompts.push_back(pool[i % pool.size()]);
  return prompts;
}

}  // namespace inferlab::lab
