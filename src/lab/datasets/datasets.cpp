// The registry of the load generator's datasets: a new dataset is a file beside these and a line here.
#include "inferlab/lab/datasets.h"

#include <algorithm>

#include "inferlab/util/error.h"

namespace inferlab::lab {

std::vector<BenchPrompt> random_dataset(const DatasetRequest& request);
std::vector<BenchPrompt> sharegpt_dataset(const DatasetRequest& request);

const std::vector<Dataset>& datasets() {
  static const std::vector<Dataset> all{
      {"random", "random prompts of --input-len tokens (exact with a tokenizer), each asking --output-len", false,
       random_dataset},
      {"sharegpt-json", "the first human turn of ShareGPT conversations in --dataset-path (vLLM's sampling)", true,
       sharegpt_dataset},
  };
  return all;
}

std::vector<std::string> dataset_names() {
  std::vector<std::string> names;
  for (const Dataset& d : datasets()) names.emplace_back(d.name);
  return names;
}

std::vector<BenchPrompt> dataset_prompts(const std::string& name, const DatasetRequest& request) {
  const auto& all = datasets();
  auto it = std::find_if(all.begin(), all.end(), [&](const Dataset& d) { return name == d.name; });
  if (it == all.end()) {
    std::string known;
    for (const Dataset& d : all) known += (known.empty() ? "" : ", ") + std::string(d.name);
    fail("--dataset {:?} is not a dataset (known: {})", name, known);
  }
  if (it->needs_path && request.path.empty()) fail("--dataset {} needs --dataset-path FILE", name);
  return it->make(request);
}

}  // namespace inferlab::lab
