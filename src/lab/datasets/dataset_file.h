// Reading the file a dataset is given: its text, the line each JSONL record or JSON array entry
// starts on, and errors that name the file, line and field (`data.jsonl:3: "prompt" must be a
// string`), so a bad file is refused by name instead of being skipped in silence.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace inferlab::lab {

struct JsonRecord {
  nlohmann::json value;
  std::size_t line = 0;  // 1-based line where the record starts
};

// The whole file; "--dataset-path FILE: cannot open" when it cannot be read.
std::string read_dataset_file(const std::string& path);
// "FILE:LINE: message".
[[noreturn]] void fail_at(const std::string& path, std::size_t line, const std::string& message);
// Each non-blank line of a JSONL file, parsed; a line that is not JSON is refused with its number.
std::vector<JsonRecord> read_jsonl(const std::string& path);
// The entries of a file that holds one JSON array, each with the line it starts on.
std::vector<JsonRecord> read_json_array(const std::string& path, const char* what);

// Field checks of one record: `"key" is missing` / `"key" must be a string`, at the record's line.
const std::string& string_field(const nlohmann::json& object, const char* key, const std::string& path,
                                std::size_t line, const std::string& where = "");
// A positive integer (a JSON number with no fraction); other values are refused by name.
int positive_int_field(const nlohmann::json& object, const char* key, const std::string& path, std::size_t line);

}  // namespace inferlab::lab
