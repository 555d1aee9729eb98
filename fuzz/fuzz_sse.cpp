// The load generator's SSE parser (src/lab/sse.cpp) and stream-chunk reader. The input is fed
// three ways: whole, one byte at a time, and split where the first byte's bits say; all three
// must dispatch the same events (the parser's promise: bytes may arrive split anywhere). Each
// event's data goes through parse_stream_chunk, which may only throw inferlab::Error.
#include <vector>

#include "fuzz_common.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/lab/sse.h"
#include "inferlab/util/error.h"

namespace {

struct Outcome {
  std::vector<inferlab::lab::SseEvent> events;
  bool error = false;
  bool dropped_partial = false;
};

template <typename Split>
Outcome run(std::string_view bytes, Split split) {
  Outcome out;
  inferlab::lab::SseParser parser([&](const inferlab::lab::SseEvent& e) { out.events.push_back(e); }, 4096);
  try {
    split(bytes, parser);
    out.dropped_partial = parser.finish();
  } catch (const inferlab::Error&) {
    out.error = true;  // a line over the limit
  }
  return out;
}

bool same(const Outcome& a, const Outcome& b) {
  if (a.error != b.error) return false;
  if (a.error) return true;  // where exactly the oversized line was noticed may differ
  if (a.dropped_partial != b.dropped_partial || a.events.size() != b.events.size()) return false;
  for (std::size_t i = 0; i < a.events.size(); ++i)
    if (a.events[i].event != b.events[i].event || a.events[i].data != b.events[i].data || a.events[i].id != b.events[i].id)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t seed = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  Outcome whole = run(bytes, [](std::string_view b, inferlab::lab::SseParser& p) { p.feed(b); });
  Outcome bytewise = run(bytes, [](std::string_view b, inferlab::lab::SseParser& p) {
    for (char c : b) p.feed(std::string_view(&c, 1));
  });
  Outcome chunked = run(bytes, [seed](std::string_view b, inferlab::lab::SseParser& p) {
    std::size_t step = 1 + (seed % 7), at = 0;
    while (at < b.size()) {
      std::size_t n = std::min(step, b.size() - at);
      p.feed(b.substr(at, n));
      at += n;
      step = 1 + ((step * 5 + seed) % 13);
    }
  });
  if (!same(whole, bytewise)) inferlab::fuzz::invariant_failed("events differ: whole vs one byte at a time");
  if (!same(whole, chunked)) inferlab::fuzz::invariant_failed("events differ: whole vs chunked");

  for (const auto& event : whole.events) {
    try {
      inferlab::lab::StreamChunk chunk = inferlab::lab::parse_stream_chunk(event.data);
      (void)chunk;
    } catch (const inferlab::Error&) {
    }
  }
  return 0;
}
