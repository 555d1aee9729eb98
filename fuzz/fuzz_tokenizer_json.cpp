// tokenizer.json: model (BPE vocab + merges), added tokens, normalizer, pre-tokenizer and
// post-processor trees. Must load or throw inferlab::Error; a loaded tokenizer must encode and
// decode a fixed text without crashing and give ids inside its vocabulary.
#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inferlab::fuzz::MemFile file(data, size, "tokenizer.json");
  try {
    auto tokenizer = inferlab::Tokenizer::from_tokenizer_json(file.path());
    for (bool special : {false, true}) {
      std::vector<int32_t> ids = tokenizer->encode("Hello world 123 <|im_start|> héllo\n\n  x", special);
      for (int32_t id : ids)
        if (id < 0 || id >= tokenizer->vocab_size()) inferlab::fuzz::invariant_failed("id outside the vocabulary");
      (void)tokenizer->decode(ids);
      (void)tokenizer->decode(ids, true);
    }
  } catch (const inferlab::Error&) {
  }
  return 0;
}
