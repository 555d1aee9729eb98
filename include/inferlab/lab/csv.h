// RFC 4180 CSV on top of Debian's libcsv: quoted fields with commas, quotes and newlines, and the
// line number every record starts on, so errors can point at the line to fix.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::lab {

struct CsvRecord {
  std::vector<std::string> fields;
  std::size_t line = 0;  // 1-based physical line the record starts on
};

// Every non-empty record of `text`, the header included. `source` names the input in errors
// (e.g. the file name). Throws Error naming the line of a malformed record (a stray quote).
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& source);
std::vector<CsvRecord> read_csv_file(const std::filesystem::path& path);

// One field as it must be written: quoted (quotes doubled) when it holds a comma, quote, CR or LF,
// or leading/trailing blanks (which readers may trim); as is otherwise.
std::string csv_field(std::string_view value);
// A whole record with its "\n".
std::string csv_line(const std::vector<std::string>& fields);

}  // namespace inferlab::lab
