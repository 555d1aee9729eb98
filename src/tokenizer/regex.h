// A JIT-compiled PCRE2 pattern shared by pre-tokenizers and normalizers.
#pragma once
#include <string>
#include <string_view>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "inferlab/util/error.h"

namespace inferlab::tokenizer_detail {

// A JIT-compiled PCRE2 pattern (UTF + UCP; invalid UTF-8 in the subject simply never matches).
class Regex {
 public:
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Calls on_match(start, end) for each non-overlapping match in order.
  template <typename F>
  void for_each_match(std::string_view subject, F&& on_match) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(32, nullptr);
  // Long runs (a 1 MB word) can outgrow PCRE2's default 32 KB JIT stack.
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

// PCRE2 match data and a JIT stack per thread, so one Regex serves many threads.
inline ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}

template <typename F>
inline void Regex::for_each_match(std::string_view subject, F&& on_match) const {
  ThreadMatchState& state = match_state();
  auto* text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::size_t start = 0;
  while (start < subject.size()) {
    int rc = jit_ ? pcre2_jit_match(code_, text, subject.size(), start, 0, state.data, state.context)
                  : pcre2_match(code_, text, subject.size(), start, 0, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail("pre-tokenizer regex failed at byte {}: {}", start, reinterpret_cast<char*>(message));
    }
    PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    std::size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // an empty match: step over one code point and look again
      start = end + 1;
      while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) ++start;
      continue;
    }
    on_match(begin, end);
    start = end;
  }
}

}  // namespace inferlab::tokenizer_detail
