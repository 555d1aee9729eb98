// Hermes-style tool calls, as Qwen2.5 / Qwen3 templates ask for (and the generic fallback):
//   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
// several blocks in one answer are parallel calls; text outside the blocks is content.
#include "inferlab/grammar/json_schema.h"
#include "server/tool_call_format.h"

namespace inferlab::api {
namespace {

const std::string kOpen = "<tool_call>";
const std::string kClose = "</tool_call>";

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The call in the block opening at `open` and ending at `end` (its closing tag, or the text's end);
// nullopt when the block is not a call.
std::optional<ToolCall> block_call(const std::string& text, std::size_t open, std::size_t end) {
  json object = json::parse(trim(text.substr(open + kOpen.size(), end - open - kOpen.size())), nullptr, false);
  return object.is_discarded() ? std::nullopt : tool_call_from_json(object, "arguments");
}

class Hermes : public ToolCallFormat {
 public:
  const char* name() const override { return "hermes"; }

  ParsedOutput parse(const std::string& text) const override {
    ParsedOutput out;
    std::size_t pos = 0;
    for (;;) {
      const std::size_t open = text.find(kOpen, pos);
      if (open == std::string::npos) {
        out.content += text.substr(pos);
        break;
      }
      out.content += text.substr(pos, open - pos);
      const std::size_t close = text.find(kClose, open);
      auto call = block_call(text, open, close == std::string::npos ? text.size() : close);
      if (!call) {
        // A malformed first block: no calls at all. After calls (a last call cut short by
        // max_tokens, or a block that is not a call): the calls before it count and the rest is
        // text, which is also what streaming announced before reaching it.
        if (out.calls.empty()) return {text, {}};
        out.content += text.substr(open);
        break;
      }
      out.calls.push_back(*call);
      pos = close == std::string::npos ? text.size() : close + kClose.size();
    }
    if (trim(out.content).empty()) out.content.clear();
    return out;
  }

  std::size_t content_prefix(const std::string& text, std::size_t from) const override {
    const std::size_t open = text.find(kOpen, from);
    if (open != std::string::npos) return open;
    // Hold back a tail that could be the start of the tag.
    for (std::size_t len = std::min(kOpen.size() - 1, text.size()); len > 0; --len)
      if (text.compare(text.size() - len, len, kOpen, 0, len) == 0) return text.size() - len;
    return text.size();
  }

  FinishedCalls finished_calls(const std::string& text, std::size_t from) const override {
    FinishedCalls found;
    for (std::size_t pos = from;;) {
      const std::size_t open = text.find(kOpen, pos);
      if (open == std::string::npos) return found;
      const std::size_t close = text.find(kClose, open);
      if (close == std::string::npos) return found;
      auto call = block_call(text, open, close);
      if (!call) {  // malformed: decided at the end (it becomes content)
        found.stuck = true;
        return found;
      }
      found.calls.push_back(*call);
      pos = found.end = close + kClose.size();
    }
  }

  std::string bodies(const std::vector<ToolDefinition>& tools, const GrammarLimits& limits, std::string& rules) const {
    std::string choice;
    for (std::size_t i = 0; i < tools.size(); ++i) {
      const std::string rule = fmt::format("tool-{}", i);
      rules += rule + " ::= " + gbnf_literal("{\"name\": " + json(tools[i].name).dump() + ", \"arguments\": ") + " " + rule +
               "-args \"}\"\n";
      rules += tool_arguments_rules(tools[i], rule + "-args", limits);
      choice += (i ? " | " : "") + rule;
    }
    return "( " + choice + " )";
  }

  std::string forced_grammar(const std::vector<ToolDefinition>& tools, bool parallel, const GrammarLimits& limits) const override {
    std::string rules;
    std::string body = bodies(tools, limits, rules);
    std::string call = "call ::= " + gbnf_literal(kOpen + "\n") + " " + body + " " + gbnf_literal("\n" + kClose) + "\n";
    std::string root = parallel ? "root ::= call ( \"\\n\" call )*\n" : "root ::= call\n";
    return root + call + rules + json_primitives_gbnf();
  }

  std::string trigger() const override { return kOpen; }

  std::string triggered_grammar(const std::vector<ToolDefinition>& tools, bool parallel, const GrammarLimits& limits) const override {
    std::string rules;
    std::string body = bodies(tools, limits, rules);
    std::string root = "root ::= \"\\n\" " + body + " " + gbnf_literal("\n" + kClose) +
                       (parallel ? " ( " + gbnf_literal("\n" + kOpen + "\n") + " " + body + " " + gbnf_literal("\n" + kClose) + " )*" : "") + "\n";
    return root + rules + json_primitives_gbnf();
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_hermes_format() { return std::make_unique<Hermes>(); }

}  // namespace inferlab::api
