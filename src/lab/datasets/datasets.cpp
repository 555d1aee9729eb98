// The registry of the load generator's datasets: a new dataset is a file beside these and a line here.
#include "inferlab/lab/datasets.h"

#include <algorithm>

#include "inferlab/util/error.h"

namespace inferlab::lab {

std::vector<BenchPrompt> random_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> sharegpt_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> custom_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> sonnet_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> prefix_repetition_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> generated_shared_prefix_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> multi_turn_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> random_multi_turn_dataset(const DatasetRequest& request);

const std::vector<Dataset>& datasets() {
  static const std::vector<Dataset> all{
      {"random",
       "random prompts of --input-len tokens (default 128; exact with a tokenizer), each asking --output-len (64); "
       "--random-range-ratio R draws both from [L(1-R), L(1+R)]",
       false, false, random_dataset},
      {"sharegpt-json", "the first turn of ShareGPT conversations in --dataset-path (vLLM's sampling)", true, false,
       sharegpt_dataset},
      {"sharegpt", "the same as sharegpt-json (vLLM's name)", true, false, sharegpt_dataset},
      {"custom",
       "vLLM's custom JSONL in --dataset-path: {\"prompt\": ..., \"output_tokens\": N} a line (--output-len "
       "overrides output_tokens)",
       true, false, custom_dataset},
      {"sonnet",
       "vLLM's sonnet sampling of the lines of the text file --dataset-path: --sonnet-prefix-len (200) tokens of "
       "its first lines shared, random lines up to --input-len (550), --output-len (150)",
       true, false, sonnet_dataset},
      {"prefix_repetition",
       "vLLM's: --prefix-repetition-num-prefixes (10) random prefixes of --prefix-repetition-prefix-len (256) "
       "tokens, each request adding a --prefix-repetition-suffix-len (256) suffix, --output-len (128)",
       false, false, prefix_repetition_dataset},
      {"generated-shared-prefix",
       "SGLang's: --gsp-num-groups (64) system prompts of --gsp-system-prompt-len (2048) tokens, each with "
       "--gsp-prompts-per-group (16) questions of --gsp-question-len (128), --output-len (256)",
       false, false, generated_shared_prefix_dataset},
      {"multi-turn",
       "conversations from ShareGPT JSON in --dataset-path: every user turn sent after the previous answer with "
       "the whole history (at most --num-turns); --num-requests conversations",
       true, true, multi_turn_dataset},
      {"random-multi-turn",
       "generated conversations: --num-turns (3) user turns of --input-len (64) random tokens, each sent after the "
       "previous answer with the whole history, --output-len (64); --num-requests conversations",
       false, true, random_multi_turn_dataset},
  };
  return all;
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const Dataset& d : datasets()) names.emplace_back(d.name);
  return names;
}

const Dataset& find_dataset(const std::string& name) {
  const auto& all = datasets();
  auto it = std::find_if(all.begin(), all.end(), [&](const Dataset& d) { return name == d.name; });
  if (it == all.end()) {
    std::string known;
    for (const Dataset& d : all) known += (known.empty() ? "" : ", ") + std::string(d.name);
    fail("--dataset {:?} is not a dataset (known: {})", name, known);
  }
  return *it;
}

std::vector<BenchPrompt> dataset_prompts(const std::string& name, const DatasetRequest& request) {
  const Dataset& dataset = find_dataset(name);
  if (dataset.needs_path && request.path.empty()) fail("--dataset {} needs --dataset-path FILE", name);
  if (request.count <= 0) fail("--num-requests must be positive, got {}", request.count);
  return dataset.make(request);
}

}  // namespace inferlab::lab
