#include "inferlab/lab/sse.h"

#include "inferlab/util/error.h"

namespace inferlab::lab {

SseParser::SseParser(Handler on_event, std::size_t max_line_bytes)
    : on_event_(std::move(on_event)), max_line_(max_line_bytes) {}

void SseParser::feed(std::string_view bytes) {
  if (at_start_) {
    // The BOM may itself arrive split; hold up to 3 bytes until we know.
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    while (!bytes.empty() && bom_probe_.size() < 3 && kBom[bom_probe_.size()] == bytes.front()) {
      bom_probe_ += bytes.front();
      bytes.remove_prefix(1);
    }
    if (bom_probe_.size() < 3 && bytes.empty()) return;  // still undecided
    at_start_ = false;
    if (bom_probe_.size() == 3) bom_probe_.clear();
    if (!bom_probe_.empty()) {
      std::string held = std::move(bom_probe_);
      bom_probe_.clear();
      feed(held);
    }
  }
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (after_cr_) {
      after_cr_ = false;
      if (bytes[pos] == '\n') {
        ++pos;
        continue;
      }
    }
    std::size_t stop = bytes.find_first_of("\r\n", pos);
    if (stop == std::string_view::npos) {
      if (line_.size() + (bytes.size() - pos) > max_line_)
        fail("server-sent event line longer than {} bytes", max_line_);
      line_.append(bytes.substr(pos));
      return;
    }
    if (line_.size() + (stop - pos) > max_line_) fail("server-sent event line longer than {} bytes", max_line_);
    line_.append(bytes.substr(pos, stop - pos));
    after_cr_ = bytes[stop] == '\r';
    pos = stop + 1;
    std::string line = std::move(line_);
    line_.clear();
    process_line(line);
  }
}

void SseParser::process_line(std::string_view line) {
  if (line.empty()) {
    // Dispatch: an event with no data is not dispatched (spec), but its fields are reset.
    if (has_data_) {
      if (!pending_.data.empty() && pending_.data.back() == '\n') pending_.data.pop_back();
      ++events_;
      on_event_(pending_);
    }
    std::string last_id = pending_.id;  // the last event id persists across events
    pending_ = SseEvent{};
    pending_.id = std::move(last_id);
    has_data_ = dirty_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (keep-alive)
  std::string_view field = line, value;
  if (auto colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  dirty_ = true;
  if (field == "data") {
    pending_.data.append(value);
    pending_.data += '\n';
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) pending_.id = std::string(value);
  }
  // "retry" and unknown fields are ignored.
}

bool SseParser::finish() {
  if (at_start_ && !bom_probe_.empty()) {
    at_start_ = false;
    std::string held = std::move(bom_probe_);
    bom_probe_.clear();
    feed(held);
  }
  if (!line_.empty()) {
    std::string line = std::move(line_);
    line_.clear();
    process_line(line);
  }
  after_cr_ = false;
  bool dropped = has_data_;
  pending_ = SseEvent{};
  has_data_ = dirty_ = false;
  return dropped;
}

}  // namespace inferlab::lab
