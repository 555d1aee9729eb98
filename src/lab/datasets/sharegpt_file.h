// ShareGPT JSON as its peers read it: an array of {"conversations": [{"from": "human", "value": ...},
// {"from": "gpt", "value": ...}, ...]} (other keys, such as "id", are ignored). Every entry and turn
// is checked; one that is not in this shape is refused with its line and field.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace inferlab::lab {

struct ShareGptTurn {
  std::string from;  // "human", "gpt", "system", ...
  std::string value;
};
struct ShareGptConversation {
  std::size_t line = 0;  // where its entry starts in the file
  std::vector<ShareGptTurn> turns;
};

std::vector<ShareGptConversation> read_sharegpt(const std::string& path);
// Whether a turn is the user's ("human", or "user" as some exports write it).
bool is_user_turn(const ShareGptTurn& turn);

}  // namespace inferlab::lab
