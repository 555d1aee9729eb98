// ApiError's body and the serialisation of answers (see api_error.h).
#include "server/api_error.h"

namespace inferlab::api {

ApiError::ApiError(int status_, std::string message_, std::string param_, std::string code_, std::string type_)
    : status(status_), message(std::move(message_)), type(std::move(type_)), param(std::move(param_)), code(std::move(code_)) {}

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace inferlab::api
