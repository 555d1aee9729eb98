// Chat templates: both the Jinja source and the messages are fuzzed. Input layout: the template
// source, then a NUL byte, then the messages as JSON (when that part is not a JSON array, fixed
// messages are used). Parsing and rendering must succeed or throw inferlab::Error.
#include <cstring>
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* begin = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(begin, 0, size));
  std::string source(begin, nul ? nul : begin + size);
  nlohmann::json messages = nlohmann::json::array(
      {{{"role", "system"}, {"content", "You are helpful."}}, {{"role", "user"}, {"content", "Hi <|im_end|> {{x}}"}},
       {{"role", "assistant"}, {"content", "Hello"}}, {{"role", "user"}, {"content", "Again"}}});
  if (nul) {
    auto parsed = nlohmann::json::parse(nul + 1, begin + size, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_array()) messages = std::move(parsed);
  }
  try {
    inferlab::ChatTemplate chat_template(source);
    const nlohmann::json extra = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tools", nullptr}};
    for (bool add_generation_prompt : {false, true}) {
      std::string out = chat_template.render(messages, add_generation_prompt, extra);
      if (out.size() > (64u << 20)) inferlab::fuzz::invariant_failed("rendered more than 64 MiB");
    }
  } catch (const inferlab::Error&) {
  }
  return 0;
}
