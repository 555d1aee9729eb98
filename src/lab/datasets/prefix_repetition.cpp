// --dataset prefix_repetition: vLLM's repeated-prefix workload. --prefix-repetition-num-prefixes
// random prefixes of --prefix-repetition-prefix-len tokens, each shared by an equal share of the
// requests (the first ones take one more when --num-requests does not divide), each request adding
// a random suffix of --prefix-repetition-suffix-len tokens; shuffled with the seed.
#include <algorithm>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/util/error.h"
#include "lab/datasets/random_text.h"

namespace inferlab::lab {

std::vector<BenchPrompt> prefix_repetition_dataset(const DatasetRequest& r) {
  const int prefix_len = r.prefix_len >= 0 ? r.prefix_len : 256, suffix_len = r.suffix_len > 0 ? r.suffix_len : 256;
  const int num_prefixes = r.num_prefixes > 0 ? r.num_prefixes : 10, output_len = r.output_len > 0 ? r.output_len : 128;
  if (r.count < num_prefixes)
    fail("--dataset prefix_repetition: --num-requests {} must be at least --prefix-repetition-num-prefixes {}", r.count,
         num_prefixes);
  std::mt19937_64 rng(r.seed);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < num_prefixes; ++i) {
    const std::string prefix = prefix_len > 0 ? random_text(prefix_len, rng, r.tokenizer) : "";
    const int share = r.count / num_prefixes + (i < r.count % num_prefixes ? 1 : 0);
    for (int k = 0; k < share; ++k) {
      BenchPrompt p;
      // A space between them keeps the prefix's last token whole (byte-level BPE starts the next token
      // with the space), so every request of the prefix shares its tokens; the count is measured.
      const std::string suffix = random_text(suffix_len, rng, r.tokenizer);
      p.text = prefix.empty() ? suffix : prefix + " " + suffix;
      p.input_tokens = count_tokens(p.text, r.tokenizer);
      p.output_len = output_len;
      prompts.push_back(std::move(p));
    }
  }
  std::shuffle(prompts.begin(), prompts.end(), rng);
  return prompts;
}

}  // namespace inferlab::lab
