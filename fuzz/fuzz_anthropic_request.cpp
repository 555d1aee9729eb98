// Anthropic's Messages API request parser: body bytes -> JSON object -> ParsedRequest, exactly as
// /v1/messages and /v1/messages/count_tokens call it (src/server/anthropic_request.h), with the
// real Qwen tokenizer and chat template (tools, tool_use / tool_result blocks, tool_choice's
// grammar). The first byte picks the route. Bad input must end as an ApiError with a 4xx status
// (or inferlab::Error, answered as 400), and its Anthropic error body must serialise; a request
// that parses must fit the context it was checked against.
#include <cstdlib>

#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "server/anthropic_request.h"
#include "server/response_writer.h"

namespace {

struct Served {
  std::unique_ptr<inferlab::EngineText> text;
  inferlab::api::ModelContext context;
};

const Served& served() {
  static Served s = [] {
    Served out;
    auto dir = inferlab::fuzz::qwen_tokenizer_dir();
    if (!std::filesystem::exists(dir)) {
      std::fprintf(stderr, "fuzz_anthropic_request: missing %s (npm ci)\n", dir.c_str());
      std::exit(1);
    }
    out.text = std::make_unique<inferlab::EngineText>(inferlab::Tokenizer::from_folder(dir));
    out.context.text = out.text.get();
    out.context.accepted_names = {"demo", "models/demo"};
    out.context.context_length = 4096;
    out.context.vocab_size = out.text->vocab_size();
    out.context.kv_capacity_tokens = 8192;
    return out;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Served& s = served();
  if (size == 0) return 0;
  const bool generate = !(data[0] & 1);
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    auto json = inferlab::api::parse_json_object(body, s.context.limits.max_json_depth);
    if (!generate) {
      if (inferlab::api::count_messages_tokens(json, s.context) == 0) inferlab::fuzz::invariant_failed("a counted prompt of 0 tokens");
      return 0;
    }
    auto request = inferlab::api::parse_messages_request(json, s.context);
    if (request.prompts.size() != 1 || request.max_tokens.size() != 1 || request.n != 1)
      inferlab::fuzz::invariant_failed("a messages request is one prompt, one choice");
    if (request.max_tokens[0] < 1) inferlab::fuzz::invariant_failed("max_tokens < 1");
    if (request.prompts[0].size() + static_cast<std::size_t>(request.max_tokens[0]) > 4096)
      inferlab::fuzz::invariant_failed("prompt + max_tokens exceeds the context");
    for (int32_t id : request.prompts[0])
      if (id < 0 || id >= s.context.vocab_size) inferlab::fuzz::invariant_failed("prompt id outside the vocabulary");
  } catch (const inferlab::api::ApiError& e) {
    if (e.status < 400 || e.status > 499) inferlab::fuzz::invariant_failed("bad input answered with a non-4xx status", e.message);
    (void)inferlab::api::dump(inferlab::api::anthropic_error_body(e));
  } catch (const inferlab::Error&) {
  }
  return 0;
}
