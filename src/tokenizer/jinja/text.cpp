#include "tokenizer/jinja/text.h"

#include <utf8proc.h>

#include "tokenizer/utf8.h"

namespace inferlab::jinja {

std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < s.size();) {
    std::size_t n = utf8::sequence_length(s, k);
    if (n == 0) n = 1;
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

bool is_space_at(const std::string& s, std::size_t k, std::size_t* length) {
  auto c = static_cast<unsigned char>(s[k]);
  if (c < 0x80) {
    *length = 1;
    return c == ' ' || (c >= 9 && c <= 13);
  }
  utf8proc_int32_t cp = 0;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + k), static_cast<utf8proc_ssize_t>(s.size() - k), &cp);
  if (n <= 0) { *length = 1; return false; }
  *length = static_cast<std::size_t>(n);
  return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;  // JavaScript's trim() set
}

std::string trim_left(const std::string& s) {
  std::size_t k = 0, n = 0;
  while (k < s.size() && is_space_at(s, k, &n)) k += n;
  return s.substr(k);
}

std::string trim_right(const std::string& s) {
  // walk code points forward, remembering where the trailing whitespace began
  std::size_t k = 0, n = 0, last_non_space_end = 0;
  while (k < s.size()) {
    bool space = is_space_at(s, k, &n);
    k += n;
    if (!space) last_non_space_end = k;
  }
  return s.substr(0, last_non_space_end);
}

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  std::size_t b = 0, e = s.size();
  if (left) while (b < e && chars.find(s[b]) != std::string::npos) ++b;
  if (right) while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

namespace {

// Each character's code point through map(code point, index of the character); characters that
// utf8proc does not decode are copied as they are (and still count for the index).
template <typename Map>
std::string map_code_points(const std::string& s, Map map) {
  std::string out;
  std::size_t index = 0;
  for (auto& ch : characters(s)) {
    utf8proc_int32_t cp = 0;
    utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(ch.data()), static_cast<utf8proc_ssize_t>(ch.size()), &cp);
    if (cp < 0) out += ch;
    else utf8::append(out, static_cast<char32_t>(map(cp, index)));
    ++index;
  }
  return out;
}

}  // namespace

std::string to_upper(const std::string& s) {
  return map_code_points(s, [](utf8proc_int32_t cp, std::size_t) { return utf8proc_toupper(cp); });
}

std::string to_lower(const std::string& s) {
  return map_code_points(s, [](utf8proc_int32_t cp, std::size_t) { return utf8proc_tolower(cp); });
}

std::string capitalize(const std::string& s) {
  return map_code_points(s, [](utf8proc_int32_t cp, std::size_t index) { return index == 0 ? utf8proc_toupper(cp) : utf8proc_tolower(cp); });
}

std::string title_case(const std::string& s) {
  bool start = true;  // a word starts after any character that is not a letter
  return map_code_points(s, [&start](utf8proc_int32_t cp, std::size_t) {
    bool letter = utf8proc_category(cp) <= UTF8PROC_CATEGORY_LO && utf8proc_category(cp) >= UTF8PROC_CATEGORY_LU;
    utf8proc_int32_t mapped = start ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
    start = !letter;
    return mapped;
  });
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  std::size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    std::size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
  }
  return out + s.substr(start);
}

}  // namespace inferlab::jinja
