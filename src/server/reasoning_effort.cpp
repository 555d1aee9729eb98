// The reasoning effort as the chat template's variables (see reasoning_effort.h).
#include "server/reasoning_effort.h"

#include <set>

#include "server/request_fields.h"

namespace inferlab::api {
namespace {

// OpenAI's reasoning efforts (chat's reasoning_effort, the Responses API's reasoning.effort).
const std::set<std::string>& openai_efforts() {
  static const std::set<std::string> efforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
  return efforts;
}

// What gpt-oss's template was trained with ("Reasoning: " + the value goes into its system message).
bool harmony_effort(const std::string& effort) { return effort == "low" || effort == "medium" || effort == "high"; }

}  // namespace

bool template_reads_reasoning_effort(const ModelContext& model) {
  return model.text && model.text->chat_template_source().find("reasoning_effort") != std::string::npos;
}

void apply_reasoning_effort(const json* effort_field, const std::string& param, const ModelContext& model, json& variables) {
  std::string effort, from = param;
  if (effort_field) {
    if (!effort_field->is_string() || !openai_efforts().count(effort_field->get<std::string>()))
      bad(param, "'{}' must be one of none, minimal, low, medium, high, xhigh, max, got {}", param, effort_field->dump());
    effort = effort_field->get<std::string>();
  }
  if (auto given = variables.find("reasoning_effort"); given != variables.end() && !given->is_null()) {
    if (!given->is_string())
      bad("chat_template_kwargs", "chat_template_kwargs.reasoning_effort must be a string, got {}", type_of(*given));
    const std::string kwarg = given->get<std::string>();
    if (!effort.empty() && kwarg != effort)
      bad(param, "'{}' is '{}' but chat_template_kwargs.reasoning_effort is '{}'; give the effort once", param, effort, kwarg);
    if (effort.empty()) {
      effort = kwarg;
      from = "chat_template_kwargs";
    }
  }
  if (effort.empty()) return;
  if (template_reads_reasoning_effort(model)) {
    if (!harmony_effort(effort))
      bad(from, "this model's chat template (gpt-oss's harmony format) takes reasoning effort low, medium or high, got '{}'",
          effort);
    variables["reasoning_effort"] = effort;
    return;
  }
  if (!openai_efforts().count(effort))
    bad(from, "chat_template_kwargs.reasoning_effort must be one of none, minimal, low, medium, high, xhigh, max, got '{}'",
        effort);
  // An on/off template: none (and minimal, the least OpenAI has that still may think) turns it
  // off; the other efforts leave the template's default, which thinks. No token budget is set.
  if (effort != "none" && effort != "minimal") return;
  if (auto on = variables.find("enable_thinking"); on != variables.end() && *on != false)
    bad(from, "reasoning effort '{}' turns thinking off, but chat_template_kwargs.enable_thinking is {}", effort, on->dump());
  variables["enable_thinking"] = false;
}

}  // namespace inferlab::api
