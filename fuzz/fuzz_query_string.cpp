// A request target's query string (src/server/http_message.cpp: percent_decoded, parse_query, as
// http_server.cpp splits the target at its first '?') and the list parameters of GET
// /v1/responses/{id}/input_items read from it (parse_input_items_query). The pairs, percent-encoded
// again and parsed again, must be the same pairs; decoding never lengthens a text; the list
// parameters either parse (a limit of 1..100) or fail with a 400 naming limit, order or include.
#include <algorithm>
#include <cctype>
#include <string>

#include "fuzz_common.h"
#include "server/http_message.h"
#include "server/responses_request.h"

namespace {

// Every byte but the unreserved ones as %XX: what a client's query builder may send.
std::string percent_encoded(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferlab::api;
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  const std::size_t question = target.find('?');
  const std::string path = percent_decoded(target.substr(0, question));
  if (path.size() > std::min(question, target.size())) inferlab::fuzz::invariant_failed("decoding lengthened the path");
  if (percent_decoded(percent_encoded(path)) != path) inferlab::fuzz::invariant_failed("path: decode(encode(x)) != x", path);
  if (question == std::string_view::npos) return 0;

  const std::string_view query = target.substr(question + 1);
  const QueryParams params = parse_query(query);
  // One pair per non-empty piece between '&'s, each no longer than its piece.
  if (params.size() > static_cast<std::size_t>(std::count(query.begin(), query.end(), '&')) + 1)
    inferlab::fuzz::invariant_failed("more pairs than pieces");
  std::string again;
  for (const auto& [name, value] : params) {
    if (name.size() + value.size() > query.size()) inferlab::fuzz::invariant_failed("a pair longer than the query");
    again += (again.empty() ? "" : "&") + percent_encoded(name) + "=" + percent_encoded(value);
  }
  if (parse_query(again) != params) inferlab::fuzz::invariant_failed("pairs differ once encoded and parsed again", again);

  try {
    const InputItemsQuery list = parse_input_items_query(params);
    if (list.limit < 1 || list.limit > 100) inferlab::fuzz::invariant_failed("a limit outside 1..100 was accepted");
  } catch (const ApiError& e) {
    if (e.status != 400 || (e.param != "limit" && e.param != "order" && e.param != "include"))
      inferlab::fuzz::invariant_failed("input_items query: not a 400 naming limit, order or include:", e.message);
  }
  return 0;
}
