#include "server/embedding_request.h"

#include <bit>
#include <cstring>

#include "server/request_fields.h"

namespace inferlab::api {
namespace {

// OpenAI's own limit on the inputs of one request.
constexpr std::size_t kMaxInputs = 2048;

// No byte bound before tokenizing, as the generation routes have: a WordPiece token may stand for
// a whole unknown word and whitespace makes none, so no bytes-per-token bound holds; the body
// limit (--max-body-bytes) bounds the work.
std::vector<int32_t> tokenize_input(const std::string& text, const ModelContext& model) {
  // As sentence-transformers and vLLM embed: the tokenizer's special tokens ([CLS] ... [SEP]) added.
  return model.text->tokenize(text, /*add_special_tokens=*/true);
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const json& body, const ModelContext& model) {
  check_model(body, model);
  EmbeddingsRequest out;
  const json* input = field(body, "input");
  if (!input) bad("input", "'input' is required");
  if (input->is_string()) {
    out.inputs.push_back(tokenize_input(input->get<std::string>(), model));
  } else if (input->is_array()) {
    if (input->empty()) bad("input", "'input' must not be an empty list");
    if (input->size() > kMaxInputs) bad("input", "'input' has {} items; at most {} per request", input->size(), kMaxInputs);
    if ((*input)[0].is_number()) {
      out.inputs.push_back(token_ids(*input, "input", model.vocab_size));  // one input as token ids
    } else {
      for (std::size_t i = 0; i < input->size(); ++i) {
        const json& item = (*input)[i];
        if (item.is_string()) out.inputs.push_back(tokenize_input(item.get<std::string>(), model));
        else if (item.is_array()) out.inputs.push_back(token_ids(item, "input", model.vocab_size));
        else bad("input", "input[{}] must be a string or a list of token ids, got {}", i, type_of(item));
      }
    }
  } else {
    bad("input", "'input' must be a string, a list of strings or a list of token ids, got {}", type_of(*input));
  }
  for (std::size_t i = 0; i < out.inputs.size(); ++i) {
    const std::size_t n = out.inputs[i].size();
    if (n == 0) bad("input", "input[{}] is empty: it has no tokens to embed", i);
    if (model.max_embedding_input_tokens > 0 && n > static_cast<std::size_t>(model.max_embedding_input_tokens))
      bad("input", "input[{}] has {} tokens; this model embeds at most {}", i, n, model.max_embedding_input_tokens);
  }
  if (const json* format = field(body, "encoding_format")) {
    if (!format->is_string() || (*format != "float" && *format != "base64"))
      bad("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got {}", format->dump());
    out.base64 = *format == "base64";
  }
  if (auto dimensions = integer(body, "dimensions", 1, 1 << 20); dimensions && *dimensions != model.embedding_dimensions)
    bad("dimensions", "this model's embeddings have {} dimensions and it was not trained for shorter ones; 'dimensions' {} "
        "is not supported",
        model.embedding_dimensions, *dimensions);
  if (const json* user = field(body, "user"); user && !user->is_string())
    bad("user", "'user' must be a string, got {}", type_of(*user));
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(v >> shift) & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

json embeddings_response(const std::vector<std::vector<float>>& embeddings, bool base64, const std::string& model_name,
                         int prompt_tokens) {
  static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32, as numpy reads them");
  json data = json::array();
  for (std::size_t i = 0; i < embeddings.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    const std::vector<float>& e = embeddings[i];
    if (base64) item["embedding"] = base64_encode(std::string_view(reinterpret_cast<const char*>(e.data()), e.size() * sizeof(float)));
    else item["embedding"] = e;
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model_name},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace inferlab::api
