// Constrained decoding's compilers and the tool-call parser. The first byte picks what the rest
// is: GBNF, a regex, a JSON schema (each compiled, then driven over a one-byte-per-token
// vocabulary by the rest of the input), or a model's answer for the Hermes / Llama 3 tool-call
// parsers. Compilers may only throw GrammarError; the streaming split fed one byte at a time must
// find the same calls as the whole-answer parse. Two tokens of the vocabulary have no bytes (special
// tokens, named <[259]> and <[260]>): step bytes 1 and 2 take them where the mask offers them.
#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"
#include "inferlab/grammar/regex.h"
#include "server/tool_call_format.h"

namespace {

std::shared_ptr<const inferlab::TokenVocabulary> bytes_vocabulary() {
  static auto v = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
    bytes.push_back("{\"");  // a few multi-byte tokens too
    bytes.push_back("\":");
    bytes.push_back("<tool_call>");
    bytes.push_back("");  // 259, 260: special tokens (no bytes), which a grammar names as <[259]>
    bytes.push_back("");
    return std::make_shared<inferlab::TokenVocabulary>(bytes);
  }();
  return v;
}

void drive(const std::string& gbnf, std::string_view steps) {
  inferlab::GrammarLimits limits;
  limits.max_elements = 20000;
  auto grammar = std::make_shared<inferlab::CompiledGrammar>(inferlab::parse_gbnf(gbnf, limits), bytes_vocabulary());
  inferlab::GrammarMatcher matcher(grammar);
  inferlab::TokenMask mask;
  constexpr int32_t kSpecials[] = {259, 260};
  for (char c : steps.substr(0, 64)) {
    matcher.fill_mask(mask);
    for (int32_t special : kSpecials)
      if (mask.test(special) != inferlab::GrammarMatcher(matcher).accept_token(special))
        inferlab::fuzz::invariant_failed("mask and accept disagree on a special token");
    // Step bytes 1 and 2 take the special tokens where the mask offers them.
    int32_t id = static_cast<uint8_t>(c);
    if ((id == 1 || id == 2) && mask.test(kSpecials[id - 1])) id = kSpecials[id - 1];
    if (mask.test(id) != inferlab::GrammarMatcher(matcher).accept_token(id)) inferlab::fuzz::invariant_failed("mask and accept disagree");
    if (!matcher.accept_token(id)) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 5;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  // The compiled text and the bytes that drive it: split at the first NUL.
  const std::size_t nul = text.find('\0');
  const std::string source = text.substr(0, nul);
  const std::string steps = nul == std::string::npos ? "" : text.substr(nul + 1);
  try {
    if (mode == 0) drive(source, steps);
    if (mode == 1) drive(inferlab::regex_to_gbnf(source), steps);
    if (mode == 2) {
      nlohmann::json schema = nlohmann::json::parse(source, nullptr, false);
      if (!schema.is_discarded()) drive(inferlab::json_schema_to_gbnf(schema), steps);
    }
  } catch (const inferlab::GrammarError&) {
  }
  if (mode >= 3) {
    auto format = mode == 3 ? inferlab::api::make_hermes_format() : inferlab::api::make_llama3_format();
    const auto parsed = format->parse(text);
    inferlab::api::ToolCallStream stream(*format);
    inferlab::api::json deltas = inferlab::api::json::array();  // the stream's ordered json
    std::string content;
    for (char c : text) content += stream.feed(std::string(1, c), deltas);
    std::vector<inferlab::api::ToolCall> calls;
    content += stream.finish(deltas, calls);
    if (calls.size() != parsed.calls.size()) inferlab::fuzz::invariant_failed("streamed calls differ from the parse");
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i].name != parsed.calls[i].name || calls[i].arguments != parsed.calls[i].arguments)
        inferlab::fuzz::invariant_failed("a streamed call differs from the parse");
  }
  return 0;
}
