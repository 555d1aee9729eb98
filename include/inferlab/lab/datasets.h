// The load generator's datasets: where `bench serve --dataset NAME` takes its prompts from. Each is
// one file under src/lab/datasets/ and one line of the registry in datasets.cpp; the CLI's
// --dataset choices, its help and its checks come from the registry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/lab/load_generator.h"

namespace inferlab::lab {

class TextTokenizer;

// What a dataset is asked for (the bench serve flags it may use).
struct DatasetRequest {
  int count = 0;                        // --num-requests
  int input_len = 0;                    // --input-len (datasets that make prompts of a length)
  int output_len = 0;                   // --output-len; 0: the dataset's own (e.g. the reply's length)
  uint64_t seed = 0;                    // --seed
  std::string path;                     // --dataset-path (datasets read from a file)
  const TextTokenizer* tokenizer = nullptr;  // exact lengths and token counts when given
};

struct Dataset {
  const char* name;     // --dataset NAME
  const char* summary;  // one line for --help
  bool needs_path;      // reads --dataset-path
  std::vector<BenchPrompt> (*make)(const DatasetRequest&);
};

// Every dataset, in the order --help lists them.
const std::vector<Dataset>& datasets();
std::vector<std::string> dataset_names();
// The prompts of dataset `name`; a clear error for an unknown name or a missing --dataset-path.
std::vector<BenchPrompt> dataset_prompts(const std::string& name, const DatasetRequest& request);

// The datasets themselves (also called directly by bench capacity and the tests).
// Random prompts: with a tokenizer, random non-special token ids re-encoded until the text is
// exactly input_len tokens; without one, random common English words (about one token each).
std::vector<BenchPrompt> random_prompts(int count, int input_len, int output_len, uint64_t seed,
                                        const TextTokenizer* tokenizer);
// ShareGPT JSON ([{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}]):
// the first human turn of conversations with at least two turns, sampled with the seed. Output
// length: output_len when > 0, else the reply's token count (needs a tokenizer).
std::vector<BenchPrompt> sharegpt_prompts(const std::string& path, int count, int output_len, uint64_t seed,
                                          const TextTokenizer* tokenizer);

}  // namespace inferlab::lab
