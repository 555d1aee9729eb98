// Multi-turn conversations: each user turn is sent after the answer to the one before, with the
// whole history (the real answers included), so a server with a prefix cache finds the history
// cached. --dataset multi-turn reads them from ShareGPT JSON (every user turn of each conversation,
// max_tokens from --output-len or the recorded reply's length); --dataset random-multi-turn makes
// --num-turns turns of --input-len random tokens each. --num-requests counts conversations.
#include <algorithm>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"
#include "lab/datasets/random_text.h"
#include "lab/datasets/sharegpt_file.h"

namespace inferlab::lab {

namespace {

// The conversations' turns, conversation after conversation, each numbered (1-based turns).
std::vector<BenchPrompt> numbered(const std::vector<std::vector<BenchPrompt>>& conversations, int count) {
  std::vector<BenchPrompt> turns;
  for (int c = 0; c < count; ++c) {
    int k = 0;
    for (BenchPrompt turn : conversations[c % conversations.size()]) {
      turn.conversation = c;
      turn.turn = ++k;
      turns.push_back(std::move(turn));
    }
  }
  return turns;
}

}  // namespace

std::vector<BenchPrompt> multi_turn_dataset(const DatasetRequest& r) {
  if (r.output_len <= 0 && !r.tokenizer)
    fail("--dataset multi-turn takes each recorded reply's length as max_tokens, which needs a tokenizer "
         "(--tokenizer); or give --output-len");
  std::vector<std::vector<BenchPrompt>> pool;
  for (const ShareGptConversation& c : read_sharegpt(r.path)) {
    std::vector<BenchPrompt> turns;
    for (std::size_t i = 0; i < c.turns.size(); ++i) {
      if (!is_user_turn(c.turns[i])) continue;
      // The reply recorded after this user turn gives its length; a last turn without one has none.
      const bool replied = i + 1 < c.turns.size() && !is_user_turn(c.turns[i + 1]);
      if (r.output_len <= 0 && !replied) break;
      BenchPrompt p;
      p.text = c.turns[i].value;
      p.output_len = r.output_len > 0
                         ? r.output_len
                         : std::max<int>(1, static_cast<int>(r.tokenizer->encode(c.turns[i + 1].value).size()));
      turns.push_back(std::move(p));
      if (r.num_turns > 0 && static_cast<int>(turns.size()) == r.num_turns) break;
    }
    if (!turns.empty()) pool.push_back(std::move(turns));
  }
  if (pool.empty()) fail("--dataset-path {}: no conversation with a user (\"human\") turn", r.path);
  std::mt19937_64 rng(r.seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  return numbered(pool, r.count);
}

std::vector<BenchPrompt> random_multi_turn_dataset(const DatasetRequest& r) {
  const int turns = r.num_turns > 0 ? r.num_turns : 3;
  const int input_len = r.input_len > 0 ? r.input_len : 64, output_len = r.output_len > 0 ? r.output_len : 64;
  std::mt19937_64 rng(r.seed);
  std::vector<std::vector<BenchPrompt>> conversations(std::max(r.count, 1));
  for (auto& conversation : conversations)
    for (int t = 0; t < turns; ++t) {
      BenchPrompt p;
      p.text = random_text(input_len, rng, r.tokenizer);
      p.output_len = output_len;
      conversation.push_back(std::move(p));
    }
  return numbered(conversations, r.count);
}

}  // namespace inferlab::lab
