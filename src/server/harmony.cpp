// The harmony format's channels as reasoning, content and tool calls (see harmony.h).
#include "server/harmony.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "inferlab/grammar/json_schema.h"

namespace inferlab::api {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>";
// What ends a body: <|end|> (more messages follow), <|return|> (the answer is done), <|call|> (a tool
// call waits for its result); a <|start|> with no <|end|> before it is read as the next header.
constexpr std::string_view kEnds[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};

// The first marker of `markers` in text (npos when none), and which.
std::pair<std::size_t, std::string_view> first_of(std::string_view text, std::span<const std::string_view> markers) {
  std::pair<std::size_t, std::string_view> first{std::string_view::npos, {}};
  for (std::string_view m : markers)
    if (const std::size_t at = text.find(m); at < first.first) first = {at, m};
  return first;
}

// The longest end of `text` that begins one of the markers (it may still become that marker).
std::size_t partial_marker(std::string_view text, std::span<const std::string_view> markers) {
  std::size_t longest = 0;
  for (std::string_view m : markers)
    for (std::size_t len = std::min(m.size() - 1, text.size()); len > longest; --len)
      if (text.substr(text.size() - len) == m.substr(0, len)) {
        longest = len;
        break;
      }
  return longest;
}

std::string trim(std::string_view s) {
  const std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

// The word after `key` in a header (up to a space or the next marker); "" when key is absent.
std::string word_after(std::string_view header, std::string_view key) {
  const std::size_t at = header.find(key);
  if (at == std::string_view::npos) return "";
  const std::string_view rest = header.substr(at + key.size());
  return std::string(rest.substr(0, std::min(rest.find(' '), rest.find('<'))));
}

}  // namespace

void HarmonySplitter::open_message(const std::string& header) {
  // The recipient may sit after the role (assistant to=functions.f<|channel|>commentary json) or
  // after the channel (<|channel|>commentary to=functions.f <|constrain|>json).
  const std::string channel = word_after(header, kChannel);
  const std::string recipient = word_after(header, "to=");
  state_ = State::body;
  if (channel == "analysis") {
    kind_ = Kind::reasoning;
  } else if (calls_ && recipient.rfind("functions.", 0) == 0 && recipient.size() > 10) {
    kind_ = Kind::call;
    call_name_ = recipient.substr(10);
    arguments_.clear();
  } else {
    kind_ = Kind::content;  // final, and commentary shown to the user (a preamble)
  }
}

void HarmonySplitter::emit(const std::string& text, std::string& content, std::string& reasoning) {
  switch (kind_) {
    case Kind::reasoning: (separate_reasoning_ ? reasoning : content) += text; break;
    case Kind::content: content += text; break;
    case Kind::call: arguments_ += text; break;
  }
}

void HarmonySplitter::end_message(std::string& content, json& deltas) {
  if (kind_ == Kind::call) {
    const std::string arguments = trim(arguments_);
    const json parsed = json::parse(arguments, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      content += arguments_;  // a malformed call stays text, as the other formats keep it
    } else {
      ToolCall call{new_tool_call_id(), call_name_, arguments};
      const std::size_t index = calls_found_.size();
      deltas.push_back({{"index", index}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", ""}}}});
      deltas.push_back({{"index", index}, {"function", {{"arguments", call.arguments}}}});
      calls_found_.push_back(std::move(call));
    }
    arguments_.clear();
  }
  state_ = State::header;
  kind_ = Kind::content;
}

std::string HarmonySplitter::feed(std::string_view text, std::string& reasoning, json& deltas) {
  held_ += text;
  std::string content;
  for (;;) {
    if (state_ == State::header) {
      // A header ends at <|message|>; one that ends at an end marker instead had no body.
      constexpr std::string_view kHeaderEnds[] = {kMessage, kEnds[0], kEnds[1], kEnds[2]};
      const auto [at, marker] = first_of(held_, kHeaderEnds);
      if (at == std::string::npos) return content;  // the header is still being written
      const std::string header = held_.substr(0, at);
      held_.erase(0, at + marker.size());
      if (marker == kMessage) open_message(header);
      continue;
    }
    const auto [at, marker] = first_of(held_, kEnds);
    if (at != std::string::npos) {
      emit(held_.substr(0, at), content, reasoning);
      held_.erase(0, at + (marker == kStart ? 0 : marker.size()));  // a <|start|> opens the next header
      end_message(content, deltas);
      continue;
    }
    const std::size_t shown = held_.size() - partial_marker(held_, kEnds);
    emit(held_.substr(0, shown), content, reasoning);
    held_.erase(0, shown);
    return content;
  }
}

std::string HarmonySplitter::finish(std::string& reasoning, std::vector<ToolCall>& calls) {
  std::string content;
  if (state_ == State::body) {
    emit(held_, content, reasoning);
    if (kind_ == Kind::call) content += arguments_;  // cut short (max_tokens): not a call
    arguments_.clear();
  } else {
    // A header never closed by <|message|>: not harmony after all, so the text is shown as it is.
    content += held_;
  }
  held_.clear();
  state_ = State::header;
  calls = calls_found_;  // each was announced (deltas) when its message ended
  return content;
}

std::string harmony_forced_call_grammar(const std::vector<ToolDefinition>& tools, const HarmonyCallTokens& tokens,
                                        const GrammarLimits& limits) {
  auto token = [](int32_t id) { return fmt::format("<[{}]>", id); };
  std::string rules, choice;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const std::string rule = fmt::format("call-{}", i);
    rules += rule + " ::= " + gbnf_literal(tools[i].name + " ") + " " + token(tokens.constrain) + " " + gbnf_literal("json") +
             " " + token(tokens.message) + " " + rule + "-args\n";
    rules += tool_arguments_rules(tools[i], rule + "-args", limits);
    choice += (i ? " | " : "") + rule;
  }
  return "root ::= " + token(tokens.channel) + " " + gbnf_literal("commentary to=functions.") + " ( " + choice + " ) " +
         token(tokens.call) + "\n" + rules + json_primitives_gbnf();
}

HarmonyParsed parse_harmony(std::string_view text, bool calls) {
  HarmonySplitter splitter(calls, true);
  HarmonyParsed out;
  json deltas = json::array();
  out.content = splitter.feed(text, out.reasoning, deltas);
  out.content += splitter.finish(out.reasoning, out.calls);
  return out;
}

}  // namespace inferlab::api
