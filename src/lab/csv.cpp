#include "inferlab/lab/csv.h"

#include <csv.h>

#include <fstream>
#include <sstream>

#include "inferlab/util/error.h"

namespace inferlab::lab {
namespace {

struct ParseState {
  std::vector<CsvRecord> records;
  CsvRecord current;
  bool in_record = false;
  std::size_t line = 1;  // line being fed to libcsv
};

void on_field(void* data, std::size_t size, void* raw) {
  auto& state = *static_cast<ParseState*>(raw);
  if (!state.in_record) {
    state.in_record = true;
    state.current.line = state.line;
  }
  state.current.fields.emplace_back(data ? static_cast<const char*>(data) : "", data ? size : 0);
}

void on_record_end(int, void* raw) {
  auto& state = *static_cast<ParseState*>(raw);
  if (!state.in_record) state.current.line = state.line;
  state.records.push_back(std::move(state.current));
  state.current = CsvRecord{};
  state.in_record = false;
}

struct Parser {
  csv_parser parser{};
  Parser() {
    if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) != 0) fail("libcsv: cannot initialise a parser");
  }
  ~Parser() { csv_free(&parser); }
};

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& source) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 BOM written by spreadsheets
  Parser p;
  ParseState state;
  // Fed one physical line at a time so the line number of each field and error is known.
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    end = end == std::string_view::npos ? text.size() : end + 1;
    std::size_t length = end - pos;
    if (csv_parse(&p.parser, text.data() + pos, length, on_field, on_record_end, &state) != length)
      fail("{} line {}: malformed CSV ({}); a field holding a quote must be quoted with the quote "
           "doubled", source, state.line, csv_strerror(csv_error(&p.parser)));
    pos = end;
    if (text[end - 1] == '\n') ++state.line;
  }
  if (csv_fini(&p.parser, on_field, on_record_end, &state) != 0)
    fail("{} line {}: malformed CSV ({}): a quoted field is never closed", source,
         state.in_record ? state.current.line : state.line, csv_strerror(csv_error(&p.parser)));
  return std::move(state.records);
}

std::vector<CsvRecord> read_csv_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: no such file or not readable", path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_csv(buffer.str(), path.string());
}

std::string csv_field(std::string_view value) {
  bool needs_quotes = value.find_first_of(",\"\r\n") != std::string_view::npos ||
                      (!value.empty() && (value.front() == ' ' || value.front() == '\t' ||
                                          value.back() == ' ' || value.back() == '\t'));
  if (!needs_quotes) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_field(fields[i]);
  }
  out += '\n';
  return out;
}

}  // namespace inferlab::lab
