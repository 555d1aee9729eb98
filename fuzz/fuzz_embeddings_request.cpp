// The /v1/embeddings parser: body bytes -> JSON object -> EmbeddingsRequest, as the route calls it
// (src/server/embedding_request.h), with the real Qwen tokenizer. Bad input must end as an
// ApiError with a 4xx status (or inferlab::Error, answered as 400). A request that parses has at
// least one input, each non-empty, within the input limit and the vocabulary.
#include <cstdlib>

#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "server/embedding_request.h"

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
      std::fprintf(stderr, "fuzz_embeddings_request: missing %s (npm ci)\n", dir.c_str());
      std::exit(1);
    }
    out.text = std::make_unique<inferlab::EngineText>(inferlab::Tokenizer::from_folder(dir));
    out.context.text = out.text.get();
    out.context.accepted_names = {"demo"};
    out.context.context_length = 512;
    out.context.vocab_size = out.text->vocab_size();
    out.context.kv_capacity_tokens = 8192;
    out.context.embedding_dimensions = 384;
    out.context.max_embedding_input_tokens = 256;
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
    auto request = inferlab::api::parse_embeddings_request(json, s.context);
    if (request.inputs.empty()) inferlab::fuzz::invariant_failed("a parsed request without inputs");
    for (const auto& input : request.inputs) {
      if (input.empty() || input.size() > 256) inferlab::fuzz::invariant_failed("an input empty or over the limit");
      for (int32_t id : input)
        if (id < 0 || id >= s.context.vocab_size) inferlab::fuzz::invariant_failed("an input id outside the vocabulary");
    }
    std::vector<std::vector<float>> embeddings(request.inputs.size(), std::vector<float>(3, 0.5f));
    (void)inferlab::api::dump(inferlab::api::embeddings_response(embeddings, request.base64, "demo", 1));
  } catch (const inferlab::api::ApiError& e) {
    if (e.status < 400 || e.status > 499) inferlab::fuzz::invariant_failed("bad input answered with a non-4xx status", e.message);
    (void)inferlab::api::dump(e.body());
  } catch (const inferlab::Error&) {
  }
  return 0;
}
