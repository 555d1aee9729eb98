// POST /v1/responses' parser: body bytes -> JSON object -> ResponsesRequest, exactly as the handler
// calls it (src/server/responses_request.h), with the real Qwen tokenizer and chat template and a
// store holding one earlier response ("resp_seed": a message and a function_call), so input items,
// previous_response_id and call_id matching are all reached. Bad input must end as an ApiError
// with a 4xx status (or inferlab::Error, answered as 400); a request that parses must fit the
// context and carry the echo every response object needs.
#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "server/responses_request.h"

namespace {

struct Served {
  std::unique_ptr<inferlab::EngineText> text;
  inferlab::api::ModelContext context;
  std::unique_ptr<inferlab::api::ResponseStore> store;
};

const Served& served() {
  static Served s = [] {
    Served out;
    auto dir = inferlab::fuzz::qwen_tokenizer_dir();
    if (!std::filesystem::exists(dir)) {
      std::fprintf(stderr, "fuzz_responses_request: missing %s (npm ci)\n", dir.c_str());
      std::exit(1);
    }
    out.text = std::make_unique<inferlab::EngineText>(inferlab::Tokenizer::from_folder(dir));
    out.context.text = out.text.get();
    out.context.accepted_names = {"demo"};
    out.context.context_length = 4096;
    out.context.vocab_size = out.text->vocab_size();
    out.context.kv_capacity_tokens = 8192;
    out.store = std::make_unique<inferlab::api::ResponseStore>(4);
    out.store->put("resp_seed", {inferlab::api::json::object(), inferlab::api::json::parse(R"([
      {"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"}]},
      {"type":"function_call","id":"fc_1","call_id":"call_seed","name":"get_weather","arguments":"{}","status":"completed"}])")});
    return out;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Served& s = served();
  std::string body(reinterpret_cast<const char*>(data), size);
  try {
    auto json = inferlab::api::parse_json_object(body, s.context.limits.max_json_depth);
    auto request = inferlab::api::parse_responses_request(json, s.context, [&](const std::string& id) { return s.store->get(id); });
    const auto& parsed = request.parsed;
    if (parsed.prompts.size() != 1 || parsed.max_tokens.size() != 1) inferlab::fuzz::invariant_failed("one prompt per response");
    if (parsed.max_tokens[0] < 1 || parsed.prompts[0].size() + static_cast<std::size_t>(parsed.max_tokens[0]) > 4096)
      inferlab::fuzz::invariant_failed("prompt + max_output_tokens outside the context");
    for (const char* key : {"tools", "tool_choice", "text", "parallel_tool_calls", "metadata", "store"})
      if (!request.echo.contains(key)) inferlab::fuzz::invariant_failed("the echo lacks a field", key);
    if (!request.conversation.is_array() || request.conversation.empty()) inferlab::fuzz::invariant_failed("no conversation items");
    (void)inferlab::api::dump(request.echo);
  } catch (const inferlab::api::ApiError& e) {
    if (e.status < 400 || e.status > 499) inferlab::fuzz::invariant_failed("bad input answered with a non-4xx status", e.message);
    (void)inferlab::api::dump(e.body());
  } catch (const inferlab::Error&) {
  }
  return 0;
}
