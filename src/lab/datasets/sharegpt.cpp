// --dataset sharegpt-json (also sharegpt): the first turn of ShareGPT conversations (--dataset-path),
// as vLLM's benchmark samples them.
#include <algorithm>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"
#include "lab/datasets/dataset_file.h"
#include "lab/datasets/sharegpt_file.h"

namespace inferlab::lab {

std::vector<ShareGptConversation> read_sharegpt(const std::string& path) {
  std::vector<ShareGptConversation> out;
  for (const JsonRecord& entry : read_json_array(path, "ShareGPT conversations ({\"conversations\": [...]})")) {
    const std::string at = fmt::format("entry {}: ", out.size() + 1);
    if (!entry.value.is_object()) fail_at(path, entry.line, at + "must be a JSON object with \"conversations\"");
    auto turns = entry.value.find("conversations");
    if (turns == entry.value.end()) fail_at(path, entry.line, at + "\"conversations\" is missing");
    if (!turns->is_array()) fail_at(path, entry.line, at + "\"conversations\" must be an array of {\"from\", \"value\"}");
    ShareGptConversation conversation{.line = entry.line, .turns = {}};
    for (std::size_t k = 0; k < turns->size(); ++k) {
      const std::string where = fmt::format("{}\"conversations\"[{}]", at, k);
      const nlohmann::json& turn = (*turns)[k];
      conversation.turns.push_back({string_field(turn, "from", path, entry.line, where),
                                    string_field(turn, "value", path, entry.line, where)});
    }
    out.push_back(std::move(conversation));
  }
  return out;
}

bool is_user_turn(const ShareGptTurn& turn) { return turn.from == "human" || turn.from == "user"; }

std::vector<BenchPrompt> sharegpt_prompts(const std::string& path, int count, int output_len, uint64_t seed,
                                          const TextTokenizer* tokenizer) {
  if (output_len <= 0 && !tokenizer)
    fail("the sharegpt dataset takes each reply's length as max_tokens, which needs a tokenizer "
         "(--tokenizer); or give --output-len");
  std::vector<BenchPrompt> pool;
  for (const ShareGptConversation& c : read_sharegpt(path)) {
    if (c.turns.size() < 2) continue;  // vLLM's: a prompt needs a reply after it
    BenchPrompt p;
    p.text = c.turns[0].value;
    if (tokenizer) {
      auto in_len = static_cast<int64_t>(tokenizer->encode(p.text).size());
      auto reply_len = static_cast<int64_t>(tokenizer->encode(c.turns[1].value).size());
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
  if (pool.empty()) fail("--dataset-path {}: no usable conversation (need a first turn followed by a reply)", path);
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
