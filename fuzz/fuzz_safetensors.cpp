// safetensors: the 8-byte header length, the JSON header and its offsets checked against the file.
// Any input must either load or throw inferlab::Error; a loaded tensor's bytes must lie in the file.
#include "fuzz_common.h"
#include "inferlab/util/error.h"
#include "inferlab/loading/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inferlab::fuzz::MemFile file(data, size);
  try {
    inferlab::SafetensorsFile st(file.path());
    for (const std::string& name : st.names()) {
      auto view = st.find(name);
      if (!view) inferlab::fuzz::invariant_failed("names() lists a tensor find() does not know:", name);
      if (static_cast<std::size_t>(view->numel()) * inferlab::dtype_size(view->dtype) != view->bytes)
        inferlab::fuzz::invariant_failed("tensor bytes != numel * dtype size:", name);
      if (view->numel() <= 4096) {
        auto values = view->to_f32();  // reads every byte: ASan catches a view past the mapping
        if (values.size() != static_cast<std::size_t>(view->numel())) inferlab::fuzz::invariant_failed("to_f32 size");
      }
    }
  } catch (const inferlab::Error&) {
  }
  return 0;
}
