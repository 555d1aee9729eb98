#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "inferlab/util/error.h"

namespace inferlab::fast {

WeightFormat choose_format(const std::string& option, DType stored) {
  if (option.empty() || option == "auto") return stored == DType::BF16 ? WeightFormat::BF16 : WeightFormat::F32;
  return parse_format(option);
}

WeightFormat choose_format(const std::string& option, const TensorView& view) {
  if (view.ggml_type < 0) return choose_format(option, view.dtype);
  if (option.empty() || option == "auto") return WeightFormat::Blocks;
  return parse_format(option);
}

namespace {
void check_shape(const TensorView& view, int64_t rows, int64_t cols) {
  if (view.shape.size() != 2 || view.shape[0] != rows || view.shape[1] != cols)
    fail("tensor in {} has shape {} but [{}, {}] was expected", view.origin, shape_string(view.shape), rows, cols);
}

void drop_pages(const TensorView& view) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(view.data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(view.data) + view.bytes) / page * page;
  // Only whole pages inside the tensor; on anonymous memory (a test's buffer) this would zero
  // them, so only file mappings are touched: madvise on those never loses data.
  if (end > begin && view.origin.size() &&
      (view.origin.find(".safetensors") != std::string::npos || view.origin.find(".gguf") != std::string::npos))
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}
}  // namespace

PackedMatrix pack_tensor(const TensorView& view, int out, int in, WeightFormat format) {
  check_shape(view, out, in);
  if (view.ggml_type >= 0) {
    // As stored (Blocks), or converted because --weights asked for another format.
    PackedMatrix m = format == WeightFormat::Blocks
                         ? PackedMatrix::from_ggml(static_cast<const uint8_t*>(view.data), static_cast<uint32_t>(view.ggml_type), out, in)
                         : PackedMatrix::from_f32(view.to_f32().data(), out, in, format);
    drop_pages(view);
    return m;
  }
  PackedMatrix m = view.dtype == DType::BF16 ? PackedMatrix::from_bf16(static_cast<const uint16_t*>(view.data), out, in, format)
                   : view.dtype == DType::F32 ? PackedMatrix::from_f32(static_cast<const float*>(view.data), out, in, format)
                                              : PackedMatrix::from_f32(view.to_f32().data(), out, in, format);
  drop_pages(view);
  return m;
}

PackedMatrix pack_transposed(const TensorView& view, int in, int out, WeightFormat format) {
  check_shape(view, in, out);
  const std::vector<float> stored = view.to_f32();
  std::vector<float> transposed(stored.size());
  for (int i = 0; i < in; ++i)
    for (int o = 0; o < out; ++o) transposed[static_cast<std::size_t>(o) * in + i] = stored[static_cast<std::size_t>(i) * out + o];
  drop_pages(view);
  return PackedMatrix::from_f32(transposed.data(), out, in, format);
}

}  // namespace inferlab::fast
