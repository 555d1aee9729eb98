// GGUF F16 matrices in panels of 16 rows (the f16 format, packed.h): per input k the 16 rows'
// fp16 values (32 bytes), which one vcvtph2ps widens to 16 fp32 lanes (8 on AVX2) for FMAs with
// the fp32 activations as given. Every value is the file's; per row and output the FMAs run in k
// order from zero, the same on every instruction set and for any batch. (Dequantizing each row to
// fp32 on every matmul, the blocks path, decoded a Qwen2.5-0.5B-shaped F16 file at 1.7 t/s where
// llama.cpp ran 37.5, on a Zen 5.) Packing and the scalar kernel; the SIMD tiles are in
// kernels_avx2.cpp / kernels_avx512.cpp.
#include <cmath>
#include <cstring>

#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

PackedMatrix PackedMatrix::from_f16(const uint16_t* rows, int out, int in) {
  PackedMatrix m;
  m.format_ = WeightFormat::F16;
  m.out_ = out;
  m.in_ = m.in_padded_ = in;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.panel_bytes_ = static_cast<std::size_t>(in) * kPanel * 2;
  m.data_ = AlignedBuffer(m.panel_bytes_ * m.panels_);  // padding rows stay zero
  kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      uint16_t* panel = reinterpret_cast<uint16_t*>(m.data_.data() + p * m.panel_bytes_);
      for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
        const uint16_t* src = rows + static_cast<std::size_t>(p * kPanel + r) * in;
        for (int k = 0; k < in; ++k) panel[k * kPanel + r] = src[k];
      }
    }
  });
  return m;
}

namespace detail {
void f16_scalar(const KernelArgs& a, int panel_begin, int panel_end) {
  const PackedMatrix& w = *a.w;
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint16_t* panel = reinterpret_cast<const uint16_t*>(w.panel_data(p));
    for (int r = 0; r < kPanel && p * kPanel + r < w.out(); ++r)
      for (int row = 0; row < a.rows; ++row) {
        const float* x = a.x + static_cast<std::size_t>(row) * w.in();
        float acc = 0;
        for (int k = 0; k < w.in(); ++k) acc = std::fma(f16_to_f32(panel[k * kPanel + r]), x[k], acc);
        store_output(a, row, p * kPanel + r, acc);
      }
  }
}
}  // namespace detail

}  // namespace inferlab::fast
