// --dataset generated-shared-prefix: SGLang's shared-prefix groups. --gsp-num-groups random system
// prompts of --gsp-system-prompt-len tokens, each followed ("\n\n", as SGLang joins them) by
// --gsp-prompts-per-group random questions of --gsp-question-len tokens. The groups x prompts are
// shuffled with the seed; the run sends --num-requests of them (cycled when more).
#include <algorithm>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/util/error.h"
#include "lab/datasets/random_text.h"

namespace inferlab::lab {

std::vector<BenchPrompt> generated_shared_prefix_dataset(const DatasetRequest& r) {
  const int groups = r.gsp_num_groups > 0 ? r.gsp_num_groups : 64;
  const int per_group = r.gsp_prompts_per_group > 0 ? r.gsp_prompts_per_group : 16;
  const int system_len = r.gsp_system_prompt_len > 0 ? r.gsp_system_prompt_len : 2048;
  const int question_len = r.gsp_question_len > 0 ? r.gsp_question_len : 128;
  const int output_len = r.output_len > 0 ? r.output_len : 256;
  if (static_cast<int64_t>(groups) * per_group > 10'000'000)
    fail("--gsp-num-groups {} x --gsp-prompts-per-group {} is more prompts than a run can hold", groups, per_group);
  std::mt19937_64 rng(r.seed);
  std::vector<BenchPrompt> pool;
  for (int g = 0; g < groups; ++g) {
    const std::string system = random_text(system_len, rng, r.tokenizer);
    for (int q = 0; q < per_group; ++q) {
      BenchPrompt p;
      p.text = system + "\n\n" + random_text(question_len, rng, r.tokenizer);
      p.input_tokens = count_tokens(p.text, r.tokenizer);
      p.output_len = output_len;
      pool.push_back(std::move(p));
    }
  }
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < r.count; ++i) prompts.push_back(pool[i % pool.size()]);
  return prompts;
}

}  // namespace inferlab::lab
