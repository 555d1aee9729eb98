// One code point to its UTF-8 bytes: the tokenizer and the grammar compiler both write UTF-8.
#pragma once
#include <string>

namespace inferlab {

// Appends `cp` (at most U+10FFFF; callers check) as 1-4 UTF-8 bytes.
void append_utf8(std::string& out, char32_t cp);

}  // namespace inferlab
