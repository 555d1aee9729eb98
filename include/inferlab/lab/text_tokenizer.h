// What the load generator asks of a tokenizer: exact prompt lengths (random ids decoded, then
// re-encoded) and token counts when a server sends no usage. An interface, so that the lab links no
// tokenizer code; the CLI hands it the model's tokenizer through inferlab/bench/lab_tokenizer.h.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::lab {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;  // no special tokens added
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual bool is_special(int32_t id) const = 0;  // never drawn for a random prompt
};

}  // namespace inferlab::lab
