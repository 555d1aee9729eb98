// OpenAI request parsing and validation, and the text-level pieces of a response (stop strings,
// logprobs shapes), kept apart from the HTTP plumbing so they can be tested alone.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/generation/sampler.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab::api {

using json = nlohmann::json;

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

// What the request parser needs to know about the served model.
struct ModelContext {
  std::shared_ptr<const Tokenizer> tokenizer;
  const ChatTemplate* chat_template = nullptr;  // null: the model has none
  std::vector<std::string> accepted_names;      // "model" values we answer to
  int context_length = 0;
  int vocab_size = 0;
  std::size_t kv_capacity_tokens = 0;
  int max_n = 16;
};

struct ParsedRequest {
  bool chat = false;
  std::vector<std::vector<int32_t>> prompts;  // one for chat; completions may batch several
  std::vector<std::string> prompt_texts;      // for echo
  int n = 1;
  std::vector<int> max_tokens;                // per prompt, resolved against the context
  SamplingParams sampling;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  bool logprobs = false;
  int top_logprobs = 0;
  bool skip_special_tokens = true;
};

json parse_json_object(const std::string& body);  // ApiError on malformed JSON or a non-object
void check_model(const json& body, const ModelContext& model);  // 404 for a name we do not serve
ParsedRequest parse_chat_request(const json& body, const ModelContext& model);
ParsedRequest parse_completion_request(const json& body, const ModelContext& model);

// Streams text through a set of stop strings: returns what is safe to show now, holding back a
// tail that could still become a stop string; `hit` once a stop string appears (not included).
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string feed(const std::string& piece);
  std::string finish();  // the held-back tail when the stream ends without a stop string
  bool hit() const { return hit_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
};

// One token decoded alone (a partial UTF-8 character shows as U+FFFD), and its raw bytes as the
// integer list OpenAI's logprobs "bytes" carries.
std::string token_text(const Tokenizer& tokenizer, int32_t id);
json token_bytes(const Tokenizer& tokenizer, int32_t id);

// Serialise with invalid UTF-8 replaced (a token may be half a character).
std::string dump(const json& value);

}  // namespace inferlab::api
