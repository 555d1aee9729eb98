#include "lab/datasets/dataset_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "inferlab/util/error.h"

namespace inferlab::lab {

namespace {

std::size_t line_of_byte(const std::string& text, std::size_t byte) {
  byte = std::min(byte, text.size());
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte), '\n'));
}

// nlohmann's parse_error says "...: syntax error while parsing value - invalid literal; last read: 'x'";
// the part after "syntax error" is what a user can act on.
std::string parse_problem(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  auto at = what.find("syntax error");
  return at == std::string::npos ? what : what.substr(at);
}

}  // namespace

std::string read_dataset_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--dataset-path {}: cannot open", path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void fail_at(const std::string& path, std::size_t line, const std::string& message) {
  fail("{}:{}: {}", path, line, message);
}

std::vector<JsonRecord> read_jsonl(const std::string& path) {
  const std::string text = read_dataset_file(path);
  std::vector<JsonRecord> records;
  std::size_t start = 0, line = 1;
  while (start < text.size()) {
    std::size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    std::string_view row(text.data() + start, stop - start);
    if (row.find_first_not_of(" \t\r") != std::string_view::npos) {
      try {
        records.push_back({nlohmann::json::parse(row), line});
      } catch (const nlohmann::json::parse_error& e) {
        fail_at(path, line, "not a JSON object (" + parse_problem(e) + ")");
      }
      if (!records.back().value.is_object()) fail_at(path, line, "must be a JSON object, one per line");
    }
    start = stop + 1;
    ++line;
  }
  return records;
}

std::vector<JsonRecord> read_json_array(const std::string& path, const char* what) {
  const std::string text = read_dataset_file(path);
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail_at(path, line_of_byte(text, e.byte ? e.byte - 1 : 0), "not JSON (" + parse_problem(e) + ")");
  }
  if (!all.is_array()) fail_at(path, 1, fmt::format("expected a JSON array of {}", what));
  // The line each top-level entry starts on: a scan of the (valid) text for values at depth 1.
  std::vector<std::size_t> lines;
  std::size_t line = 1;
  int depth = 0;
  bool in_string = false, escaped = false, expect_value = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (depth == 1 && expect_value && c != ']') {
      lines.push_back(line);
      expect_value = false;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') expect_value = ++depth == 1;
    else if (c == ']' || c == '}') --depth;
    else if (c == ',' && depth == 1) expect_value = true;
  }
  std::vector<JsonRecord> records;
  for (std::size_t i = 0; i < all.size(); ++i) records.push_back({std::move(all[i]), i < lines.size() ? lines[i] : 1});
  return records;
}

const std::string& string_field(const nlohmann::json& object, const char* key, const std::string& path,
                                std::size_t line, const std::string& where) {
  const std::string name = where.empty() ? fmt::format("\"{}\"", key) : fmt::format("{}[\"{}\"]", where, key);
  if (!object.is_object()) fail_at(path, line, (where.empty() ? std::string("the record") : where) + " must be a JSON object");
  auto it = object.find(key);
  if (it == object.end()) fail_at(path, line, name + " is missing");
  if (!it->is_string()) fail_at(path, line, name + " must be a string");
  return it->get_ref<const std::string&>();
}

int positive_int_field(const nlohmann::json& object, const char* key, const std::string& path, std::size_t line) {
  const nlohmann::json& v = object.at(key);
  const bool whole = v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!whole || v.get<double>() < 1 || v.get<double>() > 1e9)
    fail_at(path, line, fmt::format("\"{}\" must be a positive integer, got {}", key, v.dump()));
  return static_cast<int>(v.get<double>());
}

}  // namespace inferlab::lab
