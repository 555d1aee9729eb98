// Llama 3.x tool calls: the whole answer is one JSON object {"name": "f", "parameters": {...}},
// optionally after <|python_tag|> (the built-in tools' marker). Anything else is content.
#include "inferlab/grammar/json_schema.h"
#include "server/tool_call_format.h"

namespace inferlab::api {
namespace {

const std::string kPythonTag = "<|python_tag|>";

std::string without_tag(const std::string& text) {
  std::size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::string rest = text.substr(b);
  if (rest.rfind(kPythonTag, 0) == 0) rest = rest.substr(kPythonTag.size());
  return rest;
}

class Llama3 : public ToolCallFormat {
 public:
  const char* name() const override { return "llama3_json"; }

  ParsedOutput parse(const std::string& text) const override {
    json object = json::parse(without_tag(text), nullptr, false);
    auto call = object.is_discarded() ? std::nullopt : tool_call_from_json(object, "parameters");
    if (!call) return {text, {}};
    return {"", {*call}};
  }

  // A call starts the answer: while the answer may still become one, nothing is content.
  std::size_t content_prefix(const std::string& text, std::size_t) const override {
    std::size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return 0;
    if (text[b] == '{') return 0;
    const std::string rest = text.substr(b, kPythonTag.size());
    if (kPythonTag.compare(0, rest.size(), rest) == 0) return 0;
    return text.size();
  }

  FinishedCalls finished_calls(const std::string&, std::size_t) const override {
    return {};  // known only at the end: the object may go on
  }

  std::string forced_grammar(const std::vector<ToolDefinition>& tools, bool, const GrammarLimits& limits) const override {
    std::string rules, choice;
    for (std::size_t i = 0; i < tools.size(); ++i) {
      const std::string rule = fmt::format("tool-{}", i);
      rules += rule + " ::= " + gbnf_literal("{\"name\": " + json(tools[i].name).dump() + ", \"parameters\": ") + " " + rule +
               "-args \"}\"\n";
      rules += tool_arguments_rules(tools[i], rule + "-args", limits);
      choice += (i ? " | " : "") + rule;
    }
    return "root ::= " + choice + "\n" + rules + json_primitives_gbnf();
  }

  std::string trigger() const override { return ""; }
  std::string triggered_grammar(const std::vector<ToolDefinition>&, bool, const GrammarLimits&) const override { return ""; }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_llama3_format() { return std::make_unique<Llama3>(); }

}  // namespace inferlab::api
