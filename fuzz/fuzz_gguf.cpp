// GGUF: header, typed metadata (nested arrays, strings), tensor directory; then, when the file
// carries a vocabulary, the tokenizer built from it. Must load or throw inferlab::Error.
#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "inferlab/loading/gguf.h"
#include "inferlab/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inferlab::fuzz::MemFile file(data, size);
  try {
    inferlab::GgufFile gguf = inferlab::read_gguf(file.path());
    if (gguf.data_offset % gguf.alignment != 0 && gguf.alignment != 0)
      inferlab::fuzz::invariant_failed("data_offset not aligned");
    if (gguf.find("tokenizer.ggml.tokens")) {
      auto tokenizer = inferlab::Tokenizer::from_gguf(file.path());
      std::vector<int32_t> ids = tokenizer->encode("Hello world, 123 héllo\n\t!");
      for (int32_t id : ids)
        if (id < 0 || id >= tokenizer->vocab_size()) inferlab::fuzz::invariant_failed("id outside the vocabulary");
      (void)tokenizer->decode(ids);
    }
  } catch (const inferlab::Error&) {
  }
  return 0;
}
