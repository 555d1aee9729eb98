// The load generator's datasets: where `bench serve --dataset NAME` (also `--dataset-name`, vLLM's
// spelling) takes its prompts from; `bench capacity` picks from the same registry. Each is one file
// under src/lab/datasets/ and one line of the registry in datasets.cpp; the CLI's --dataset choices,
// its help and its checks come from the registry. A file that is not in its format is refused with
// the file, line and field (`data.jsonl:3: "prompt" must be a string`), never skipped in silence.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/lab/load_generator.h"

namespace inferlab::lab {

class TextTokenizer;

// What a dataset is asked for (the bench serve flags it may use).
struct DatasetRequest {
  int count = 0;                        // --num-requests (multi-turn datasets: conversations)
  int input_len = 0;                    // --input-len; 0: the dataset's own default
  int output_len = 0;                   // --output-len; 0: the dataset's own (e.g. the reply's length)
  uint64_t seed = 0;                    // --seed
  std::string path;                     // --dataset-path (datasets read from a file)
  const TextTokenizer* tokenizer = nullptr;  // exact lengths and token counts when given
  double range_ratio = 0;               // --random-range-ratio: lengths uniform in [L(1-r), L(1+r)]
  int prefix_len = -1;                  // --sonnet-prefix-len / --prefix-repetition-prefix-len; -1: default
  int suffix_len = 0;                   // --prefix-repetition-suffix-len; 0: default
  int num_prefixes = 0;                 // --prefix-repetition-num-prefixes; 0: default
  int gsp_num_groups = 0;               // --gsp-num-groups; 0: default (SGLang's)
  int gsp_prompts_per_group = 0;        // --gsp-prompts-per-group
  int gsp_system_prompt_len = 0;        // --gsp-system-prompt-len
  int gsp_question_len = 0;             // --gsp-question-len
  int num_turns = 0;                    // --num-turns (random-multi-turn); 0: default
};

struct Dataset {
  const char* name;     // --dataset NAME
  const char* summary;  // one line for --help
  bool needs_path;      // reads --dataset-path
  bool multi_turn;      // conversations: each turn waits for the previous answer (chat endpoint only)
  std::vector<BenchPrompt> (*make)(const DatasetRequest&);
};

// Every dataset, in the order --help lists them.
const std::vector<Dataset>& datasets();
std::vector<std::string> dataset_names();
// The dataset of that name; an error listing the known names otherwise.
const Dataset& find_dataset(const std::string& name);
// The prompts of dataset `name`; a clear error for an unknown name or a missing --dataset-path.
std::vector<BenchPrompt> dataset_prompts(const std::string& name, const DatasetRequest& request);

// The datasets themselves (also called directly by bench capacity and the tests).
// Random prompts: with a tokenizer, random non-special token ids re-encoded until the text is
// exactly input_len tokens; without one, random common English words (about one token each).
// With range_ratio r > 0, each prompt's input and output lengths are drawn uniformly from
// [floor(L(1-r)), ceil(L(1+r))] (output at least 1), as vLLM's --random-range-ratio.
std::vector<BenchPrompt> random_prompts(int count, int input_len, int output_len, uint64_t seed,
                                        const TextTokenizer* tokenizer, double range_ratio = 0);
// ShareGPT JSON ([{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}]):
// the first turn of conversations with at least two turns, sampled with the seed (vLLM's). Output
// length: output_len when > 0, else the reply's token count (needs a tokenizer).
std::vector<BenchPrompt> sharegpt_prompts(const std::string& path, int count, int output_len, uint64_t seed,
                                          const TextTokenizer* tokenizer);

}  // namespace inferlab::lab
