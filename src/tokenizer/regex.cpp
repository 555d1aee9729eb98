#include "tokenizer/regex.h"

namespace inferlab::tokenizer_detail {

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    fail("pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", error_offset,
         reinterpret_cast<char*>(message), pattern);
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

}  // namespace inferlab::tokenizer_detail
