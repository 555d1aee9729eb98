#include "tokenizer/utf8.h"

#include "inferlab/util/utf8_encode.h"

namespace inferlab::utf8 {
namespace {

// Bytes a sequence led by `lead` needs in total (0: not a lead byte), and the allowed range of
// its second byte (Unicode Table 3-7: rules out overlongs, surrogates and > U+10FFFF).
struct LeadInfo {
  int length;
  unsigned char second_lo, second_hi;
};

LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes from s[i] that form a valid (possibly incomplete) prefix of a sequence.
std::size_t valid_prefix(std::string_view s, std::size_t i, int* needed) {
  LeadInfo info = lead_info(static_cast<unsigned char>(s[i]));
  *needed = info.length;
  if (info.length <= 1) return info.length;
  std::size_t n = 1;
  while (n < static_cast<std::size_t>(info.length) && i + n < s.size()) {
    auto b = static_cast<unsigned char>(s[i + n]);
    bool ok = n == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

std::size_t sequence_length(std::string_view s, std::size_t i) {
  int needed = 0;
  std::size_t n = valid_prefix(s, i, &needed);
  return needed > 0 && n == static_cast<std::size_t>(needed) ? n : 0;
}

bool is_valid(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) { ++i; continue; }
    std::size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    int needed = 0;
    std::size_t n = valid_prefix(s, i, &needed);
    if (needed > 0 && n == static_cast<std::size_t>(needed)) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += n == 0 ? 1 : n;  // a maximal subpart: the valid prefix that was cut short
    }
  }
  return out;
}

std::size_t complete_prefix_length(std::string_view s) {
  std::size_t start = s.size() >= 3 ? s.size() - 3 : 0;
  for (std::size_t i = s.size(); i-- > start;) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return s.size();
    if (b >= 0xC0) {
      int needed = 0;
      std::size_t n = valid_prefix(s, i, &needed);
      if (needed > 1 && n == s.size() - i && n < static_cast<std::size_t>(needed)) return i;
      return s.size();
    }
  }
  return s.size();
}

void append(std::string& out, char32_t cp) { append_utf8(out, cp); }

}  // namespace inferlab::utf8
