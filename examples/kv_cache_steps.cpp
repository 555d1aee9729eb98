// Course step 3: greedy decoding with and without the KV cache. Without it every step feeds the
// whole sequence ([5, 6, 7, ...]); with it the prompt once, then one position ([5, 1, 1, ...]).
// Usage: kv_cache_steps [MODEL] [prompt ids, e.g. 1,2,3,4,5]  (default: SmolLM2-135M-Instruct)
#include <cstdio>
#include <sstream>

#include "inferlab/util/error.h"
#include "inferlab/generation/greedy_decode.h"
#include "inferlab/model/model.h"
#include "inferlab/util/model_path.h"

int main(int argc, char** argv) try {
  const std::string model_name = argc > 1 ? argv[1] : inferlab::default_model_path().string();
  std::vector<int32_t> prompt{1, 2, 3, 4, 5};
  if (argc > 2) {
    prompt.clear();
    std::stringstream in(argv[2]);
    for (std::string item; std::getline(in, item, ',');) prompt.push_back(std::stoi(item));
  }
  auto model = inferlab::Model::load(model_name);
  inferlab::GenerateOptions options;
  options.max_new_tokens = 8;
  std::vector<int32_t> tokens[2];
  for (bool use_cache : {false, true}) {
    options.use_cache = use_cache;
    auto result = inferlab::generate_greedy(*model, prompt, options);
    std::string lengths;
    for (int n : result.positions_fed) lengths += (lengths.empty() ? "" : ", ") + std::to_string(n);
    std::string ids;
    for (int32_t t : result.tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    std::printf("%s [%s] tokens %s\n", use_cache ? "True" : "False", lengths.c_str(), ids.c_str());
    tokens[use_cache] = result.tokens;
  }
  std::printf("identical with and without the cache: %s\n", tokens[0] == tokens[1] ? "yes" : "no");
  return tokens[0] == tokens[1] ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
