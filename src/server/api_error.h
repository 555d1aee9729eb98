// The OpenAI error shape every failure is answered in, and the one JSON serialisation every
// answer body goes through.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace inferlab::api {

using json = nlohmann::ordered_json;

// An error answered in OpenAI's shape {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::exception {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error");
  const char* what() const noexcept override { return message.c_str(); }
  json body() const;
};

// How a route writes its errors: ApiError::body (OpenAI's shape) unless the route gives another
// (Anthropic's routes: anthropic_error_body, responses/anthropic_message.cpp). The transport uses
// the route's for every error it answers there, its own (auth, limits, overload) included.
using ErrorShape = json (*)(const ApiError& error);

// Serialise with invalid UTF-8 replaced (a token may be half a character).
std::string dump(const json& value);

}  // namespace inferlab::api
