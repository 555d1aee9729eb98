// GGUF model files: metadata to hyper-parameters, the tensor directory against the file, tensor
// types and shapes, packing every block type; when a model loads, one forward step of two tokens.
// Must load or throw inferlab::Error.
#include <cmath>

#include "fuzz_common.h"
#include "inferlab/model/model.h"
#include "inferlab/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inferlab::fuzz::MemFile file(data, size);
  try {
    auto model = inferlab::Model::load(file.path().string(), inferlab::LoadOptions{.threads = 1});
    const auto& c = model->config();
    inferlab::KVCache cache(c, 16, 16);
    inferlab::SequenceKV seq;
    if (!seq.reserve(cache, 2)) inferlab::fuzz::invariant_failed("no KV room for 2 tokens");
    const std::vector<int32_t> tokens{0, c.vocab_size - 1};
    const inferlab::BatchEntry entry{tokens, &seq, false};
    const auto logits = model->forward(std::span<const inferlab::BatchEntry>(&entry, 1), cache);
    if (logits.size() != static_cast<std::size_t>(c.vocab_size)) inferlab::fuzz::invariant_failed("logits size");
    seq.release(cache);
  } catch (const inferlab::Error&) {
  }
  return 0;
}
