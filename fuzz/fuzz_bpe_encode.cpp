// BPE encode on two real vocabularies: Qwen's tokenizer.json (NFC normalizer, special tokens,
// the Qwen pre-tokenizer regex) and GPT-2's GGUF vocab. The first byte picks the tokenizer; the
// rest is the text. Invariants the header promises:
//   ids lie in the vocabulary;
//   decode_bytes(encode(s)) == s when the normalizer leaves s unchanged (GPT-2: always);
//   StreamDecoder fed one id at a time, then flushed, equals decode(ids).
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {

std::shared_ptr<const inferlab::Tokenizer> load_or_die(const std::filesystem::path& path, bool gguf) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "fuzz_bpe_encode: missing %s (npm ci / ../shared)\n", path.c_str());
    std::exit(1);
  }
  return gguf ? inferlab::Tokenizer::from_gguf(path) : inferlab::Tokenizer::from_folder(path);
}

bool nfc_unchanged(std::string_view text) {
  utf8proc_uint8_t* mapped = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                        &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return false;  // not valid UTF-8: how the normalizer treats it is its own business
  bool same = std::string_view(reinterpret_cast<char*>(mapped), static_cast<std::size_t>(n)) == text;
  std::free(mapped);
  return same;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto qwen = load_or_die(inferlab::fuzz::qwen_tokenizer_dir(), false);
  static auto gpt2 = load_or_die(inferlab::fuzz::gpt2_gguf(), true);
  if (size == 0) return 0;
  const bool use_gpt2 = data[0] & 1;
  const bool add_special = data[0] & 2;
  const auto& tokenizer = use_gpt2 ? gpt2 : qwen;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids = tokenizer->encode(text, add_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer->vocab_size()) inferlab::fuzz::invariant_failed("id outside the vocabulary");
  if (!add_special && (use_gpt2 || nfc_unchanged(text))) {
    std::string back = tokenizer->decode_bytes(ids);
    if (back != text) inferlab::fuzz::invariant_failed("decode_bytes(encode(s)) != s", use_gpt2 ? "(gpt2)" : "(qwen)");
  }
  inferlab::StreamDecoder stream(tokenizer);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != tokenizer->decode(ids, true)) inferlab::fuzz::invariant_failed("StreamDecoder output != decode(ids)");
  return 0;
}
