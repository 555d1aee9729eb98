// POST /v1/embeddings as OpenAI defines it: `input` as a string, a list of strings, a list of
// token ids or a list of such lists; `encoding_format` float or base64; `dimensions` (only the
// model's own: no model here is trained for shorter, Matryoshka embeddings); `user` ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace inferlab::api {

struct EmbeddingsRequest {
  std::vector<std::vector<int32_t>> inputs;  // tokenized, each within the model's input limit
  bool base64 = false;                       // encoding_format "base64": little-endian float32 bytes
};

// 400 naming the field for a wrong type, an empty input or list, an input over the model's limit,
// a token id outside the vocabulary, or dimensions other than the model's.
EmbeddingsRequest parse_embeddings_request(const json& body, const ModelContext& model);

// The JSON body of the answer: one embedding per input, in order, and the token usage.
json embeddings_response(const std::vector<std::vector<float>>& embeddings, bool base64, const std::string& model_name,
                         int prompt_tokens);

// RFC 4648 base64 of the bytes (what OpenAI's base64 encoding_format sends).
std::string base64_encode(std::string_view bytes);

}  // namespace inferlab::api
