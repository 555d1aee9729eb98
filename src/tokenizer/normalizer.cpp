#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "inferlab/util/error.h"
#include "tokenizer/utf8.h"

namespace inferlab::tokenizer_detail {

namespace {

std::string apply_unicode(NormalizerKind kind, std::string_view text) {
  if (kind != NormalizerKind::Lowercase) {
    // Code points below U+0300 are unchanged by NFC unless a combining mark follows; lead bytes
    // from 0xCC up start U+0300 and beyond. Not by NFD: U+00C0..U+02FF hold precomposed letters.
    bool trivial = std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0xCC; });
    if (trivial && kind == NormalizerKind::NFC) return std::string(text);
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return std::string(text);  // ASCII: no form changes it
  }
  int options = UTF8PROC_STABLE;
  switch (kind) {
    case NormalizerKind::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalizerKind::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalizerKind::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalizerKind::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    default: break;
  }
  std::string out;
  // Normalize each valid UTF-8 run; invalid bytes pass through untouched (see docs/tokenizer.md).
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t run_end = i;
    while (run_end < text.size()) {
      if (static_cast<unsigned char>(text[run_end]) < 0x80) { ++run_end; continue; }
      std::size_t n = utf8::sequence_length(text, run_end);
      if (n == 0) break;
      run_end += n;
    }
    std::string_view run = text.substr(i, run_end - i);
    if (kind == NormalizerKind::Lowercase) {
      for (std::size_t k = 0; k < run.size();) {
        utf8proc_int32_t cp = 0;
        auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(run.data() + k),
                                  static_cast<utf8proc_ssize_t>(run.size() - k), &cp);
        utf8::append(out, static_cast<char32_t>(utf8proc_tolower(cp)));
        k += static_cast<std::size_t>(n);
      }
    } else if (!run.empty()) {
      utf8proc_uint8_t* mapped = nullptr;
      auto length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                 static_cast<utf8proc_ssize_t>(run.size()), &mapped,
                                 static_cast<utf8proc_option_t>(options));
      if (length < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(length));
      out.append(reinterpret_cast<char*>(mapped), static_cast<std::size_t>(length));
      std::free(mapped);
    }
    i = run_end;
    if (i < text.size()) out += text[i++];  // one invalid byte, as is
  }
  return out;
}

}  // namespace

// True when NFC leaves the text as it is (NFD may not: it splits Hangul syllables): no character that
// decomposes canonically, has a non-zero combining class, or can be the second half of a composition
// (Hangul V/T jamo included).
// Most text (ASCII, CJK) passes, skipping utf8proc's decompose/recompose and its allocation.
bool nfc_inert(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0xCC) {  // below U+0300 (or invalid bytes, which normalization leaves alone)
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                              static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0) {
      ++i;
      continue;
    }
    i += static_cast<std::size_t>(n);
    if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
    const utf8proc_property_t* p = utf8proc_get_property(cp);
    if (p->combining_class != 0) return false;
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;
    if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  }
  return true;
}


std::string apply_normalizer(const Normalizer& normalizer, std::string_view text) {
  switch (normalizer.kind) {
    case NormalizerKind::Prepend:
      // Hugging Face prepends only to non-empty text.
      return text.empty() ? std::string() : normalizer.text + std::string(text);
    case NormalizerKind::Replace: {
      std::string out;
      std::size_t last = 0;
      auto replace = [&](std::size_t begin, std::size_t end) {
        out.append(text, last, begin - last);
        out += normalizer.text;
        last = end;
      };
      if (normalizer.regex) {
        normalizer.regex->for_each_match(text, replace);
      } else {
        for (std::size_t at; (at = text.find(normalizer.literal, last)) != std::string_view::npos;)
          replace(at, at + normalizer.literal.size());
      }
      out.append(text, last);
      return out;
    }
    default:
      return apply_unicode(normalizer.kind, text);
  }
}

}  // namespace inferlab::tokenizer_detail
