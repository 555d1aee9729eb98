// --dataset sonnet: vLLM's sonnet sampling over any text file (--dataset-path) of lines. Each prompt
// is a fixed instruction, the file's first lines as a prefix every prompt shares (--sonnet-prefix-len
// tokens' worth) and lines drawn at random to reach --input-len. Line lengths are measured with the
// tokenizer when given, else in words (about a token each); prompts over --input-len tokens are
// drawn again, as vLLM does.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include "inferlab/lab/datasets.h"
#include "inferlab/lab/text_tokenizer.h"
#include "inferlab/util/error.h"
#include "lab/datasets/dataset_file.h"
#include "lab/datasets/random_text.h"

namespace inferlab::lab {

namespace {

constexpr const char* kInstruction = "Pick as many lines as you can from these poem lines:\n";

int word_count(const std::string& text) {
  int words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    const bool space = std::isspace(c);
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

}  // namespace

std::vector<BenchPrompt> sonnet_dataset(const DatasetRequest& r) {
  const int input_len = r.input_len > 0 ? r.input_len : 550, output_len = r.output_len > 0 ? r.output_len : 150;
  const int prefix_len = r.prefix_len >= 0 ? r.prefix_len : 200;
  const std::string text = read_dataset_file(r.path);
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    lines.push_back(text.substr(start, stop - start) + "\n");
    start = stop + 1;
  }
  if (word_count(text) == 0) fail("--dataset-path {}: no text to sample lines from", r.path);
  auto length = [&](const std::string& s) {
    return r.tokenizer ? static_cast<double>(r.tokenizer->encode(s).size()) : static_cast<double>(word_count(s));
  };
  double total = 0;
  for (const auto& line : lines) total += length(line);
  const double average = total / static_cast<double>(lines.size());
  const int instruction = static_cast<int>(length(kInstruction));
  if (input_len <= instruction)
    fail("--dataset sonnet: --input-len {} must be above the instruction's {} tokens", input_len, instruction);
  if (prefix_len > input_len)
    fail("--dataset sonnet: --sonnet-prefix-len {} must not exceed --input-len {}", prefix_len, input_len);
  const int input_lines = static_cast<int>(std::lround((input_len - instruction) / average));
  const int prefix_lines = std::max(static_cast<int>(std::lround((prefix_len - instruction) / average)), 0);
  if (prefix_lines > static_cast<int>(lines.size()))
    fail("--dataset sonnet: --sonnet-prefix-len {} needs {} lines of prefix but {} has {}", prefix_len, prefix_lines,
         r.path, lines.size());
  std::string prefix = kInstruction;
  for (int i = 0; i < prefix_lines; ++i) prefix += lines[i];

  std::mt19937_64 rng(r.seed);
  std::uniform_int_distribution<std::size_t> pick(0, lines.size() - 1);
  std::vector<BenchPrompt> prompts;
  for (int i = 0; i < r.count; ++i) {
    BenchPrompt p;
    p.output_len = output_len;
    for (int attempt = 0;; ++attempt) {
      p.text = prefix;
      for (int k = prefix_lines; k < input_lines; ++k) p.text += lines[pick(rng)];
      p.input_tokens = count_tokens(p.text, r.tokenizer);
      if (!p.input_tokens || *p.input_tokens <= input_len) break;
      if (attempt == 1000)
        fail("--dataset sonnet: no draw of {} lines of {} fits in --input-len {} tokens", input_lines, r.path, input_len);
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

}  // namespace inferlab::lab
