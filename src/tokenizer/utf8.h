// UTF-8 helpers shared by the tokenizer and the stream decoder.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace inferlab::utf8 {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one
// (a stray continuation byte, an overlong form, a surrogate, a truncated sequence...).
std::size_t sequence_length(std::string_view s, std::size_t i);

bool is_valid(std::string_view s);

// Replaces each maximal invalid subpart with U+FFFD, as Rust's String::from_utf8_lossy (and so
// Hugging Face tokenizers' decode) does.
std::string to_valid_lossy(std::string_view s);

// How many leading bytes can be emitted now: everything except a trailing sequence that is
// incomplete but could still become valid when more bytes arrive.
std::size_t complete_prefix_length(std::string_view s);

// Appends the UTF-8 encoding of a code point.
void append(std::string& out, char32_t cp);

}  // namespace inferlab::utf8
