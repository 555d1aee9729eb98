// The server's request parser: body bytes -> JSON object -> ParsedRequest, exactly as
// /v1/chat/completions and /v1/completions call it (src/server/openai_request.h), with the real Qwen
// tokenizer and chat template. The first byte picks the endpoint. Bad input must end as an
// ApiError with a 4xx status (or inferlab::Error, which the server answers as 400); anything else
// would reach the client as a 500. A request that parses must fit the context it was checked
// against.
#include <cstdlib>

#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "server/openai_request.h"

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
      std::fprintf(stderr, "fuzz_openai_request: missing %s (npm ci)\n", dir.c_str());
      std::exit(1);
    }
    out.text = std::make_unique<inferlab::EngineText>(inferlab::Tokenizer::from_folder(dir));
    out.context.text = out.text.get();
    out.context.accepted_names = {"demo", "models/demo"};
    out.context.context_length = 4096;
    out.context.vocab_size = out.text->vocab_size();
    out.context.kv_capacity_tokens = 8192;
    out.context.limits.max_n = 16;
    return out;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Served& s = served();
  if (size == 0) return 0;
  const bool chat = !(data[0] & 1);
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    auto json = inferlab::api::parse_json_object(body, s.context.limits.max_json_depth);
    auto request = chat ? inferlab::api::parse_chat_request(json, s.context)
                        : inferlab::api::parse_completion_request(json, s.context);
    if (request.prompts.empty()) inferlab::fuzz::invariant_failed("a parsed request without prompts");
    if (request.max_tokens.size() != request.prompts.size()) inferlab::fuzz::invariant_failed("max_tokens per prompt");
    if (request.n < 1 || request.n > s.context.limits.max_n) inferlab::fuzz::invariant_failed("n out of range");
    for (std::size_t i = 0; i < request.prompts.size(); ++i) {
      if (request.max_tokens[i] < 1) inferlab::fuzz::invariant_failed("max_tokens < 1");
      if (request.prompts[i].size() + static_cast<std::size_t>(request.max_tokens[i]) > 4096)
        inferlab::fuzz::invariant_failed("prompt + max_tokens exceeds the context");
      for (int32_t id : request.prompts[i])
        if (id < 0 || id >= s.context.vocab_size) inferlab::fuzz::invariant_failed("prompt id outside the vocabulary");
    }
    (void)inferlab::api::dump(json);
  } catch (const inferlab::api::ApiError& e) {
    if (e.status < 400 || e.status > 499) inferlab::fuzz::invariant_failed("bad input answered with a non-4xx status", e.message);
    (void)inferlab::api::dump(e.body());
  } catch (const inferlab::Error&) {
  }
  return 0;
}
