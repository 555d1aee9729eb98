// Server-sent events (text/event-stream) parsed incrementally, as the WHATWG spec reads them:
// bytes may arrive split anywhere (inside a field name, between \r and \n, inside a UTF-8
// sequence); an event is dispatched on its blank line, never earlier.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace inferlab::lab {

struct SseEvent {
  std::string event;  // "event:" field; empty means "message"
  std::string data;   // the "data:" lines joined with "\n"
  std::string id;
};

class SseParser {
 public:
  using Handler = std::function<void(const SseEvent&)>;
  // A line longer than max_line_bytes is an error (Error thrown from feed), so a hostile or
  // broken server cannot make us buffer without bound.
  explicit SseParser(Handler on_event, std::size_t max_line_bytes = 16u << 20);

  void feed(std::string_view bytes);
  // End of stream: a last line without its terminator is processed, but an event without its
  // blank line is dropped (the spec's rule). Returns true when such a partial event was dropped.
  bool finish();

  std::size_t events() const { return events_; }

 private:
  void process_line(std::string_view line);

  Handler on_event_;
  std::size_t max_line_;
  std::string line_;
  bool after_cr_ = false;     // the last byte was \r: a following \n belongs to the same break
  bool at_start_ = true;      // a UTF-8 BOM is skipped only at the very start
  std::string bom_probe_;
  SseEvent pending_;
  bool has_data_ = false;
  bool dirty_ = false;        // some field of the pending event was seen
  std::size_t events_ = 0;
};

}  // namespace inferlab::lab
