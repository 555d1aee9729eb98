// The load generator's datasets, each read from a small file this test writes (or generated), and
// bad files refused by name: the error names the file, the line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"

using namespace inferlab::lab;
namespace fs = std::filesystem;

namespace {

// A tokenizer whose tokens are whitespace-separated words, so a test knows every length. (The real
// tokenizers are the tokenizer's own tests' subject; here only the count matters.)
class WordTokenizer : public TextTokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    std::istringstream in{std::string(text)};
    std::string word;
    while (in >> word) ids.push_back(static_cast<int32_t>(std::hash<std::string>()(word) % 1000));
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (int32_t id : ids) text += (text.empty() ? "w" : " w") + std::to_string(id);
    return text;
  }
  int vocab_size() const override { return 1000; }
  bool is_special(int32_t id) const override { return id == 0; }
};

int words(const std::string& text) { return static_cast<int>(WordTokenizer().encode(text).size()); }

// The error a dataset raises, or "" when it raises none.
std::string error_of(const std::string& name, const DatasetRequest& request) {
  try {
    dataset_prompts(name, request);
  } catch (const inferlab::Error& e) {
    return e.what();
  }
  return "";
}

class DatasetFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("inferlab_datasets_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  fs::path dir_;
};

#define EXPECT_ERROR(expression, text)                                             \
  do {                                                                             \
    const std::string message_ = (expression);                                     \
    EXPECT_NE(message_.find(text), std::string::npos) << "the error was: " << message_; \
  } while (0)

}  // namespace

TEST(DatasetRegistry, ListsEveryFormat) {
  EXPECT_EQ(dataset_names(), (std::vector<std::string>{"random", "sharegpt-json", "sharegpt", "custom", "sonnet",
                                                        "prefix_repetition", "generated-shared-prefix", "multi-turn",
                                                        "random-multi-turn"}));
  EXPECT_TRUE(find_dataset("multi-turn").multi_turn);
  EXPECT_FALSE(find_dataset("custom").multi_turn);
  EXPECT_TRUE(find_dataset("sonnet").needs_path);
}

// vLLM's custom JSONL: {"prompt", "output_tokens"} a line; blank lines skipped (but counted).
TEST_F(DatasetFiles, CustomJsonlReadsPromptAndOutputTokens) {
  const std::string path = write("data.jsonl",
                                 "{\"prompt\": \"What is the capital of India?\", \"output_tokens\": 10}\n"
                                 "\n"
                                 "{\"prompt\": \"What is the capital of Iran?\", \"output_tokens\": 1520, \"extra\": 1}\n"
                                 "{\"prompt\": \"What is the capital of China?\", \"output_tokens\": 819.0}\n");
  WordTokenizer tokenizer;
  const auto prompts = dataset_prompts("custom", {.count = 6, .seed = 3, .path = path, .tokenizer = &tokenizer});
  ASSERT_EQ(prompts.size(), 6u);
  std::map<std::string, int> output_of;
  for (const auto& p : prompts) {
    output_of[p.text] = p.output_len;
    EXPECT_EQ(p.input_tokens.value_or(-1), words(p.text));
    EXPECT_FALSE(p.conversation.has_value());
  }
  EXPECT_EQ(output_of, (std::map<std::string, int>{{"What is the capital of India?", 10},
                                                   {"What is the capital of Iran?", 1520},
                                                   {"What is the capital of China?", 819}}));
  // Six from three lines: each twice (shuffled once, then cycled).
  EXPECT_EQ(prompts[0].text, prompts[3].text);
  // --output-len wins over the file's output_tokens, as vLLM's --custom-output-len.
  for (const auto& p : dataset_prompts("custom", {.count = 3, .output_len = 7, .path = path})) EXPECT_EQ(p.output_len, 7);
}

TEST_F(DatasetFiles, CustomJsonlRefusesBadLinesByName) {
  const std::string bad_prompt = write("data.jsonl", "{\"prompt\": \"ok\", \"output_tokens\": 3}\n\n{\"prompt\": 42}\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = bad_prompt}), bad_prompt + ":3: \"prompt\" must be a string");
  const std::string no_prompt = write("b.jsonl", "{\"text\": \"hello\", \"output_tokens\": 3}\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = no_prompt}), no_prompt + ":1: \"prompt\" is missing");
  const std::string not_json = write("c.jsonl", "{\"prompt\": \"a\", \"output_tokens\": 3}\n{\"prompt\": \"b\",\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = not_json}), not_json + ":2: not a JSON object (syntax error");
  const std::string array_line = write("d.jsonl", "[\"prompt\"]\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = array_line}), array_line + ":1: must be a JSON object");
  const std::string bad_output = write("e.jsonl", "{\"prompt\": \"a\", \"output_tokens\": \"ten\"}\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = bad_output}),
               bad_output + ":1: \"output_tokens\" must be a positive integer, got \"ten\"");
  const std::string zero_output = write("f.jsonl", "{\"prompt\": \"a\", \"output_tokens\": 0}\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .output_len = 5, .path = zero_output}),
               zero_output + ":1: \"output_tokens\" must be a positive integer, got 0");
  const std::string no_output = write("g.jsonl", "{\"prompt\": \"a\"}\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = no_output}),
               no_output + ":1: \"output_tokens\" is missing and no --output-len was given");
  EXPECT_EQ(error_of("custom", {.count = 1, .output_len = 5, .path = no_output}), "");
  const std::string empty = write("h.jsonl", "\n\n");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = empty}), "--dataset-path " + empty + ": no request");
  EXPECT_ERROR(error_of("custom", {.count = 1, .path = (dir_ / "missing.jsonl").string()}), "missing.jsonl: cannot open");
  EXPECT_ERROR(error_of("custom", {.count = 1}), "--dataset custom needs --dataset-path FILE");
}

// ShareGPT in its published shape; the first turn and its reply, as vLLM samples them.
TEST_F(DatasetFiles, ShareGptReadsConversationsWithFromAndValue) {
  const std::string path = write("sharegpt.json", R"([
  {"id": "a", "conversations": [{"from": "human", "value": "What is a KV cache?"},
                                {"from": "gpt", "value": "It keeps the keys and values of earlier tokens."}]},
  {"id": "b", "conversations": [{"from": "human", "value": "Only a question"}]},
  {"id": "c", "conversations": []},
  {"id": "d", "conversations": [{"from": "human", "value": "Please explain TTFT to me."},
                                {"from": "gpt", "value": "Time to first token."},
                                {"from": "human", "value": "And TPOT?"},
                                {"from": "gpt", "value": "Time per output token."}]}
])");
  WordTokenizer tokenizer;
  std::multiset<std::string> texts;
  for (const auto& p : dataset_prompts("sharegpt", {.count = 4, .path = path, .tokenizer = &tokenizer})) {
    texts.insert(p.text);
    EXPECT_EQ(p.output_len, p.text == "What is a KV cache?" ? 9 : 4);  // the reply's length
    EXPECT_EQ(p.input_tokens.value_or(-1), words(p.text));
  }
  EXPECT_EQ(texts, (std::multiset<std::string>{"What is a KV cache?", "What is a KV cache?", "Please explain TTFT to me.",
                                               "Please explain TTFT to me."}));
}

TEST_F(DatasetFiles, ShareGptRefusesEntriesNotInItsShapeByLine) {
  const std::string no_value = write("a.json", "[\n  {\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"},\n"
                                               "                     {\"from\": \"gpt\", \"value\": \"hello\"}]},\n"
                                               "  {\"conversations\": [{\"from\": \"human\", \"value\": \"q\"},\n"
                                               "                     {\"from\": \"gpt\"}]}\n]\n");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = no_value}),
               no_value + ":4: entry 2: \"conversations\"[1][\"value\"] is missing");
  const std::string number_value =
      write("b.json", "[{\"conversations\": [{\"from\": \"human\", \"value\": 5}, {\"from\": \"gpt\", \"value\": \"x\"}]}]");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = number_value}),
               number_value + ":1: entry 1: \"conversations\"[0][\"value\"] must be a string");
  const std::string no_from = write("c.json", "[\n\n{\"conversations\": [{\"value\": \"q\"}]}]");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = no_from}),
               no_from + ":3: entry 1: \"conversations\"[0][\"from\"] is missing");
  const std::string no_conversations = write("d.json", "[{\"id\": \"x\", \"items\": []}]");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = no_conversations}),
               no_conversations + ":1: entry 1: \"conversations\" is missing");
  const std::string not_array = write("e.json", "{\"conversations\": []}");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = not_array}),
               not_array + ":1: expected a JSON array");
  const std::string broken = write("f.json", "[\n{\"conversations\": [\n{\"from\": \"human\" \"value\": \"q\"}]}]");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = broken}), broken + ":3: not JSON (syntax error");
  const std::string short_only = write("g.json", "[{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}]");
  EXPECT_ERROR(error_of("sharegpt-json", {.count = 1, .output_len = 4, .path = short_only}), "no usable conversation");
}

// vLLM's sonnet sampling: the instruction, the file's first lines as the shared prefix, random lines
// up to --input-len. Without a tokenizer lengths are words: the instruction is 11, each line 5.
TEST_F(DatasetFiles, SonnetSharesTheFirstLinesAndSamplesTheRest) {
  std::string text;
  for (int i = 1; i <= 20; ++i) text += "line" + std::to_string(i) + " of the poem here\n";
  const std::string path = write("sonnet.txt", text);
  const auto prompts =
      dataset_prompts("sonnet", {.count = 5, .input_len = 40, .output_len = 9, .seed = 1, .path = path, .prefix_len = 20});
  ASSERT_EQ(prompts.size(), 5u);
  std::set<std::string> distinct;
  for (const auto& p : prompts) {
    ASSERT_TRUE(p.text.starts_with("Pick as many lines as you can from these poem lines:\n"
                                   "line1 of the poem here\nline2 of the poem here\n"))
        << p.text;
    EXPECT_EQ(std::count(p.text.begin(), p.text.end(), '\n'), 1 + 6);  // round((40 - 11) / 5) lines, round((20 - 11) / 5) shared
    EXPECT_EQ(p.output_len, 9);
    distinct.insert(p.text);
  }
  EXPECT_GT(distinct.size(), 1u);
  // With a tokenizer every prompt fits in --input-len tokens and says how long it is.
  WordTokenizer tokenizer;
  for (const auto& p : dataset_prompts("sonnet", {.count = 3, .input_len = 42, .path = path, .tokenizer = &tokenizer,
                                                  .prefix_len = 20})) {
    EXPECT_EQ(p.input_tokens.value_or(-1), words(p.text));
    EXPECT_EQ(*p.input_tokens, 41);  // 11 + 6 lines of 5
    EXPECT_EQ(p.output_len, 150);  // vLLM's sonnet default
  }
  EXPECT_ERROR(error_of("sonnet", {.count = 1, .input_len = 8, .path = path, .prefix_len = 0}),
               "--input-len 8 must be above the instruction's 11 tokens");
  EXPECT_ERROR(error_of("sonnet", {.count = 1, .input_len = 40, .path = path, .prefix_len = 50}),
               "--sonnet-prefix-len 50 must not exceed --input-len 40");
  EXPECT_ERROR(error_of("sonnet", {.count = 1, .input_len = 400, .path = path, .prefix_len = 300}),
               "needs 58 lines of prefix but " + path + " has 20");
  const std::string blank = write("blank.txt", "\n  \n");
  EXPECT_ERROR(error_of("sonnet", {.count = 1, .path = blank}), blank + ": no text to sample lines from");
}

// vLLM's prefix_repetition: N prefixes, each shared by its share of the requests, each request its
// own suffix; exact lengths with a tokenizer.
TEST(GeneratedDatasets, PrefixRepetitionSharesEachPrefix) {
  WordTokenizer tokenizer;
  const auto prompts = dataset_prompts("prefix_repetition", {.count = 10, .output_len = 6, .seed = 2, .tokenizer = &tokenizer,
                                                             .prefix_len = 5, .suffix_len = 4, .num_prefixes = 3});
  ASSERT_EQ(prompts.size(), 10u);
  std::map<std::string, int> share;
  std::set<std::string> suffixes;
  for (const auto& p : prompts) {
    EXPECT_EQ(p.input_tokens.value_or(-1), 9);
    EXPECT_EQ(words(p.text), 9);
    EXPECT_EQ(p.output_len, 6);
    const auto ids = tokenizer.encode(p.text);
    std::string prefix;
    for (int i = 0; i < 5; ++i) prefix += std::to_string(ids[i]) + " ";
    ++share[prefix];
    suffixes.insert(p.text.substr(p.text.size() / 2));
  }
  std::multiset<int> shares;
  for (const auto& [prefix, n] : share) shares.insert(n);
  EXPECT_EQ(shares, (std::multiset<int>{3, 3, 4}));
  EXPECT_EQ(suffixes.size(), 10u);
  EXPECT_ERROR(error_of("prefix_repetition", {.count = 2, .num_prefixes = 3}),
               "--num-requests 2 must be at least --prefix-repetition-num-prefixes 3");
}

// SGLang's generated-shared-prefix: groups x prompts, "system\n\nquestion".
TEST(GeneratedDatasets, SharedPrefixGroupsOfQuestions) {
  WordTokenizer tokenizer;
  const DatasetRequest request{.count = 8, .seed = 4, .tokenizer = &tokenizer, .gsp_num_groups = 2,
                               .gsp_prompts_per_group = 3, .gsp_system_prompt_len = 6, .gsp_question_len = 4};
  const auto prompts = dataset_prompts("generated-shared-prefix", request);
  ASSERT_EQ(prompts.size(), 8u);
  std::map<std::string, int> per_system;
  std::set<std::string> distinct;
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& p = prompts[i];
    const auto split = p.text.find("\n\n");
    ASSERT_NE(split, std::string::npos);
    EXPECT_EQ(words(p.text.substr(0, split)), 6);
    EXPECT_EQ(words(p.text.substr(split + 2)), 4);
    EXPECT_EQ(p.input_tokens.value_or(-1), 10);
    EXPECT_EQ(p.output_len, 256);  // SGLang's default
    ++per_system[p.text.substr(0, split)];
    distinct.insert(p.text);
  }
  EXPECT_EQ(per_system.size(), 2u);
  for (const auto& [system, n] : per_system) EXPECT_EQ(n, 3);
  EXPECT_EQ(distinct.size(), 6u);
  EXPECT_EQ(prompts[6].text, prompts[0].text);  // more requests than prompts: cycled
}

// vLLM's --random-range-ratio: lengths uniform in [floor(L(1-r)), ceil(L(1+r))]; r = 0 leaves the
// prompts as they were.
TEST(GeneratedDatasets, RandomRangeRatioSpreadsTheLengths) {
  WordTokenizer tokenizer;
  const auto spread = random_prompts(400, 100, 64, 5, &tokenizer, 0.5);
  std::set<int> inputs, outputs;
  double sum = 0;
  for (const auto& p : spread) {
    ASSERT_GE(*p.input_tokens, 50);
    ASSERT_LE(*p.input_tokens, 150);
    EXPECT_EQ(words(p.text), *p.input_tokens);
    ASSERT_GE(p.output_len, 32);
    ASSERT_LE(p.output_len, 96);
    inputs.insert(static_cast<int>(*p.input_tokens));
    outputs.insert(p.output_len);
    sum += static_cast<double>(*p.input_tokens);
  }
  EXPECT_GT(inputs.size(), 50u);
  EXPECT_GT(outputs.size(), 30u);
  EXPECT_NEAR(sum / 400, 100, 5);
  EXPECT_EQ(random_prompts(3, 12, 5, 42, nullptr, 0)[2].text, random_prompts(3, 12, 5, 42, nullptr)[2].text);
  for (const auto& p : dataset_prompts("random", {.count = 50, .input_len = 10, .output_len = 10, .range_ratio = 0.3}))
    EXPECT_TRUE(p.output_len >= 7 && p.output_len <= 13) << p.output_len;
  EXPECT_ERROR(error_of("random", {.count = 1, .range_ratio = 1.0}), "--random-range-ratio must be in [0, 1)");
}

// Multi-turn from ShareGPT: every user turn, in order, each conversation numbered; the recorded
// reply's length as max_tokens with a tokenizer; a last user turn without a reply has no length.
TEST_F(DatasetFiles, MultiTurnReadsEveryUserTurn) {
  const std::string path = write("chats.json", R"([
  {"conversations": [{"from": "human", "value": "first question"}, {"from": "gpt", "value": "a b c"},
                     {"from": "human", "value": "second question"}, {"from": "gpt", "value": "d e"},
                     {"from": "human", "value": "third, unanswered"}]},
  {"conversations": [{"from": "system", "value": "be brief"}, {"from": "user", "value": "only question"},
                     {"from": "assistant", "value": "x y z w"}]}
])");
  WordTokenizer tokenizer;
  const auto turns = dataset_prompts("multi-turn", {.count = 3, .seed = 0, .path = path, .tokenizer = &tokenizer});
  // Conversations 0, 1, 2 (the third repeats the first of the shuffled file); turns numbered from 1.
  std::map<int, std::vector<std::pair<std::string, int>>> by_conversation;
  for (std::size_t i = 0; i < turns.size(); ++i) {
    ASSERT_TRUE(turns[i].conversation.has_value());
    by_conversation[*turns[i].conversation].emplace_back(turns[i].text, turns[i].output_len);
    EXPECT_EQ(turns[i].turn, static_cast<int>(by_conversation[*turns[i].conversation].size()));
    if (i) EXPECT_GE(*turns[i].conversation, *turns[i - 1].conversation);  // consecutive
  }
  ASSERT_EQ(by_conversation.size(), 3u);
  const std::vector<std::pair<std::string, int>> long_chat{{"first question", 3}, {"second question", 2}};
  const std::vector<std::pair<std::string, int>> short_chat{{"only question", 4}};
  EXPECT_TRUE((by_conversation[0] == long_chat && by_conversation[1] == short_chat) ||
              (by_conversation[0] == short_chat && by_conversation[1] == long_chat));
  EXPECT_EQ(by_conversation[2], by_conversation[0]);
  // With --output-len the unanswered last turn is sent too; --num-turns caps the turns.
  const auto all = dataset_prompts("multi-turn", {.count = 2, .output_len = 5, .path = path});
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(dataset_prompts("multi-turn", {.count = 2, .output_len = 5, .path = path, .num_turns = 1}).size(), 2u);
  EXPECT_ERROR(error_of("multi-turn", {.count = 1, .path = path}), "needs a tokenizer");
}

TEST(GeneratedDatasets, RandomMultiTurnMakesConversationsOfTurns) {
  WordTokenizer tokenizer;
  const auto turns =
      dataset_prompts("random-multi-turn", {.count = 2, .input_len = 7, .seed = 9, .tokenizer = &tokenizer, .num_turns = 3});
  ASSERT_EQ(turns.size(), 6u);
  for (std::size_t i = 0; i < turns.size(); ++i) {
    EXPECT_EQ(turns[i].conversation.value_or(-1), static_cast<int>(i / 3));
    EXPECT_EQ(turns[i].turn, static_cast<int>(i % 3) + 1);
    EXPECT_EQ(words(turns[i].text), 7);
    EXPECT_EQ(turns[i].output_len, 64);
    EXPECT_FALSE(turns[i].input_tokens.has_value());  // the server counts the history; a turn's own text is not the prompt
  }
  EXPECT_NE(turns[0].text, turns[3].text);
}
