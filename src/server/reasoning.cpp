// Reasoning split out of generated text (see reasoning.h).
#include "server/reasoning.h"

namespace inferlab::api {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

bool only_space(std::string_view text) { return text.find_first_not_of(kSpace) == std::string_view::npos; }

// The length of the longest end of `text` that is the beginning of `marker` (a marker that may
// still be completed by the next piece).
std::size_t partial_marker(std::string_view text, std::string_view marker) {
  for (std::size_t len = std::min(marker.size() - 1, text.size()); len > 0; --len)
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

void drop_leading_space(std::string& text) { text.erase(0, std::min(text.size(), text.find_first_not_of(kSpace))); }

std::string without_trailing_space(std::string_view text) {
  const std::size_t last = text.find_last_not_of(kSpace);
  return std::string(last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1));
}

}  // namespace

std::optional<ReasoningMarkers> reasoning_markers_for(const std::string& chat_template) {
  if (chat_template.find("<|channel|>") != std::string::npos && chat_template.find("<|message|>") != std::string::npos)
    return ReasoningMarkers{.start = "<|channel|>", .end = "<|message|>", .harmony = true};
  ReasoningMarkers markers;
  if (chat_template.find(markers.start) == std::string::npos || chat_template.find(markers.end) == std::string::npos)
    return std::nullopt;
  return markers;
}

ReasoningStart reasoning_start_of(std::string_view prompt, const ReasoningMarkers& markers) {
  if (markers.harmony)
    return prompt.ends_with("<|channel|>final<|message|>") ? ReasoningStart::closed : ReasoningStart::open;
  const std::size_t start = prompt.rfind(markers.start), end = prompt.rfind(markers.end);
  // Only a marker at the very end (whitespace aside) counts: one inside an earlier message, or a
  // user's text that mentions it, says nothing about the answer.
  if (start != std::string_view::npos && (end == std::string_view::npos || start > end) &&
      only_space(prompt.substr(start + markers.start.size())))
    return ReasoningStart::open;
  if (end != std::string_view::npos && (start == std::string_view::npos || end > start) &&
      only_space(prompt.substr(end + markers.end.size())))
    return ReasoningStart::closed;
  return ReasoningStart::may_open;
}

std::optional<GenerationRequest::ReasoningSpan> engine_reasoning_span(ReasoningStart start, const ReasoningMarkers& markers,
                                                                      ReasoningTokens tokens) {
  if (markers.harmony) {
    if (start == ReasoningStart::closed || tokens.start < 0 || tokens.end < 0) return std::nullopt;
    return GenerationRequest::ReasoningSpan{.open = true, .start_token = -1, .end = "final", .end_token = tokens.end,
                                            .header_token = tokens.start};
  }
  switch (start) {
    case ReasoningStart::closed: return std::nullopt;
    case ReasoningStart::open:
      return GenerationRequest::ReasoningSpan{.open = true, .start_token = -1, .end = markers.end, .end_token = tokens.end};
    case ReasoningStart::may_open:
      if (tokens.start < 0) return std::nullopt;
      return GenerationRequest::ReasoningSpan{.open = false, .start_token = tokens.start, .end = markers.end, .end_token = tokens.end};
  }
  return std::nullopt;
}

ReasoningSplitter::ReasoningSplitter(ReasoningMarkers markers, ReasoningStart start)
    : markers_(std::move(markers)),
      state_(start == ReasoningStart::open ? State::inside : start == ReasoningStart::closed ? State::after : State::before),
      content_started_(start == ReasoningStart::closed) {}  // the prompt closed the thoughts: the answer is as written

std::string ReasoningSplitter::feed(std::string_view text, std::string& reasoning) {
  held_ += text;
  std::string content;
  for (;;) {
    switch (state_) {
      case State::before: {
        // Thoughts open only with the marker as the very first text (as the engine sees it: the
        // first token), so an answer is never held back but for a possible marker's beginning.
        if (std::string_view(held_).starts_with(markers_.start)) {
          held_.erase(0, markers_.start.size());
          state_ = State::inside;
          continue;
        }
        if (std::string_view(markers_.start).starts_with(held_)) return content;  // may still become the marker
        state_ = State::after;  // an answer with no thoughts: shown as written
        content_started_ = true;
        continue;
      }
      case State::inside: {
        if (!reasoning_started_) {
          drop_leading_space(held_);
          if (held_.empty()) return content;
          reasoning_started_ = true;
        }
        if (const std::size_t at = held_.find(markers_.end); at != std::string::npos) {
          reasoning += without_trailing_space(std::string_view(held_).substr(0, at));
          held_.erase(0, at + markers_.end.size());
          state_ = State::after;
          continue;
        }
        // Show all but a possible beginning of the end marker and the whitespace before it (it is
        // dropped if the thoughts end there).
        std::size_t shown = held_.size() - partial_marker(held_, markers_.end);
        while (shown > 0 && kSpace.find(held_[shown - 1]) != std::string_view::npos) --shown;
        reasoning.append(held_, 0, shown);
        held_.erase(0, shown);
        return content;
      }
      case State::after:
        if (!content_started_) {
          drop_leading_space(held_);
          if (held_.empty()) return content;
          content_started_ = true;
        }
        content += held_;
        held_.clear();
        return content;
    }
  }
}

std::string ReasoningSplitter::finish(std::string& reasoning) {
  std::string rest;
  switch (state_) {
    case State::before: rest = std::move(held_); break;  // whitespace, or the beginning of a marker: the answer's
    case State::inside: reasoning += without_trailing_space(held_); break;
    case State::after: rest = content_started_ ? std::move(held_) : std::string(); break;
  }
  held_.clear();
  return rest;
}

}  // namespace inferlab::api
