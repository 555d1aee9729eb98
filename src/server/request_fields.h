// Reading one field of a JSON request body, checked: every API's parser (openai_request.cpp,
// embedding_request.cpp, ...) reads its fields through these, so a wrong type or range is the
// same 400 naming the field everywhere. The error is OpenAI's ApiError; a route with another
// error shape translates it (its `param` names the field).
#pragma once
#include <cstdint>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace inferlab::api {

template <typename... Args>
[[noreturn]] void bad(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), param);
}

const json* field(const json& body, const char* name);  // absent or null: nullptr
std::string type_of(const json& value);                  // "an integer", "a string", ...
double number(const json& body, const char* name, double fallback, double lo, double hi);
std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi);
bool boolean(const json& body, const char* name, bool fallback);
// An array of token ids, each checked against the vocabulary.
std::vector<int32_t> token_ids(const json& array, const char* name, int vocab);

}  // namespace inferlab::api
