#include "backend/cpu/cpu_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "inferlab/util/error.h"

namespace inferlab::cpu {

std::string CpuMatrix::format() const {
  if (f32_) return "f32";
  return fast::format_name(packed_->format());
}

void CpuMatrix::add_bytes_by_format(std::map<std::string, std::size_t>& by_format) const {
  if (f32_) {
    by_format["f32"] += f32_->size() * sizeof(float);
    return;
  }
  if (packed_->parts().empty()) by_format[fast::format_name(packed_->format())] += packed_->bytes();
  for (const fast::PackedMatrix& part : packed_->parts()) by_format[fast::format_name(part.format())] += part.bytes();
}

const CpuMatrix& cpu_matrix(const Matrix& m) {
  const auto* cpu = dynamic_cast<const CpuMatrix*>(&m);
  if (!cpu) fail("the CPU backend was given a weight matrix prepared by another backend");
  return *cpu;
}

fast::WeightFormat choose_format(const std::string& option, const TensorView& view) {
  const bool automatic = option.empty() || option == "auto";
  if (view.ggml_type >= 0) return automatic ? fast::WeightFormat::Blocks : fast::parse_format(option);
  if (automatic) return view.dtype == DType::BF16 ? fast::WeightFormat::BF16 : fast::WeightFormat::F32;
  return fast::parse_format(option);
}

namespace {

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

fast::PackedMatrix pack(const TensorView& view, int rows, int cols, fast::WeightFormat format) {
  if (view.ggml_type >= 0)  // as stored (Blocks), or converted because --weights asked for another format
    return format == fast::WeightFormat::Blocks
               ? fast::PackedMatrix::from_ggml(static_cast<const uint8_t*>(view.data), static_cast<uint32_t>(view.ggml_type), rows, cols)
               : fast::PackedMatrix::from_f32(view.to_f32().data(), rows, cols, format);
  if (view.dtype == DType::BF16)
    return fast::PackedMatrix::from_bf16(static_cast<const uint16_t*>(view.data), rows, cols, format);
  if (view.dtype == DType::F32) return fast::PackedMatrix::from_f32(static_cast<const float*>(view.data), rows, cols, format);
  return fast::PackedMatrix::from_f32(view.to_f32().data(), rows, cols, format);
}

std::vector<float> transpose(const std::vector<float>& stored, int rows, int cols) {  // stored [cols][rows]
  std::vector<float> turned(stored.size());
  for (int i = 0; i < cols; ++i)
    for (int o = 0; o < rows; ++o) turned[static_cast<std::size_t>(o) * cols + i] = stored[static_cast<std::size_t>(i) * rows + o];
  return turned;
}

}  // namespace

std::shared_ptr<const CpuMatrix> load_matrix(const TensorView& view, int rows, int cols, const std::string& option,
                                             bool transposed) {
  const fast::WeightFormat format = choose_format(option, view);
  std::shared_ptr<const CpuMatrix> m;
  if (transposed) {
    std::vector<float> turned = transpose(view.to_f32(), rows, cols);
    m = format == fast::WeightFormat::F32
            ? std::make_shared<const CpuMatrix>(rows, cols, std::make_shared<const std::vector<float>>(std::move(turned)))
            : std::make_shared<const CpuMatrix>(
                  rows, cols, std::make_shared<const fast::PackedMatrix>(fast::PackedMatrix::from_f32(turned.data(), rows, cols, format)));
  } else if (format == fast::WeightFormat::F32) {
    m = std::make_shared<const CpuMatrix>(rows, cols, std::make_shared<const std::vector<float>>(view.to_f32()));
  } else {
    m = std::make_shared<const CpuMatrix>(rows, cols, std::make_shared<const fast::PackedMatrix>(pack(view, rows, cols, format)));
  }
  drop_pages(view);
  return m;
}

std::shared_ptr<const CpuMatrix> concat_rows(std::span<const MatrixPtr> parts) {
  if (parts.empty()) fail("concat_rows: no matrices");
  const int cols = parts[0]->cols();
  int rows = 0;
  bool any_packed = false;
  for (const MatrixPtr& p : parts) {
    if (p->cols() != cols) fail("concat_rows: a part has {} columns, the first {}", p->cols(), cols);
    rows += p->rows();
    any_packed |= cpu_matrix(*p).packed() != nullptr;
  }
  if (any_packed) {
    // A GGUF may store some parts in F32 (kept as floats) beside quantized ones (q in F32, k and
    // v in Q8_0): those are packed as f32 too, and concat_rows fuses parts of different formats
    // exactly.
    std::vector<fast::PackedMatrix> from_f32;
    from_f32.reserve(parts.size());
    std::vector<const fast::PackedMatrix*> packed;
    for (const MatrixPtr& p : parts) {
      const CpuMatrix& part = cpu_matrix(*p);
      if (!part.packed())
        from_f32.push_back(fast::PackedMatrix::from_f32(part.f32()->data(), part.rows(), cols, fast::WeightFormat::F32));
      packed.push_back(part.packed() ? part.packed() : &from_f32.back());
    }
    return std::make_shared<const CpuMatrix>(rows, cols,
                                             std::make_shared<const fast::PackedMatrix>(fast::PackedMatrix::concat_rows(packed)));
  }
  auto weight = std::make_shared<std::vector<float>>();
  weight->reserve(static_cast<std::size_t>(rows) * cols);
  for (const MatrixPtr& p : parts) weight->insert(weight->end(), cpu_matrix(*p).f32()->begin(), cpu_matrix(*p).f32()->end());
  return std::make_shared<const CpuMatrix>(rows, cols, std::shared_ptr<const std::vector<float>>(std::move(weight)));
}

}  // namespace inferlab::cpu
