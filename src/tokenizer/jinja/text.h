// Text helpers for the Jinja engine: strings are UTF-8 and, as in Python, counted, sliced, trimmed
// and case-mapped by code point. Bytes that are not valid UTF-8 count as one character each and
// pass through case mapping unchanged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab::jinja {

// The characters (code points) of s.
std::vector<std::string> characters(const std::string& s);

// Whether the character at s[k] is whitespace (ASCII or JavaScript's trim() set); *length: its bytes.
bool is_space_at(const std::string& s, std::size_t k, std::size_t* length);
std::string trim_left(const std::string& s);
std::string trim_right(const std::string& s);
// Python's str.strip(chars) / lstrip / rstrip, by byte.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);

std::string to_upper(const std::string& s);
std::string to_lower(const std::string& s);
std::string capitalize(const std::string& s);  // first character upper, the rest lower
std::string title_case(const std::string& s);  // each word's first letter upper, the rest lower

// Python's str.replace(from, to, count); count < 0: all.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count);

}  // namespace inferlab::jinja
