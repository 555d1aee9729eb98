// matmul(): picks the kernel set for this CPU and splits output panels across the kernel pool.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast {

namespace {
const detail::KernelTable& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Amx: return detail::amx_kernels();
    case Isa::Avx512: return detail::avx512_kernels();
    case Isa::Avx2: return detail::avx2_kernels();
    case Isa::Scalar: break;
  }
  return detail::scalar_kernels();
}

void matmul_f32(const float* x, int rows, const PackedMatrix& w, const float* bias, float* y) {
  const int out = w.out(), in = w.in();
  if (bias)
    for (int r = 0; r < rows; ++r) std::memcpy(y + static_cast<std::size_t>(r) * out, bias, sizeof(float) * out);
  if (rows == 1)
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w.f32_data(), in, x, 1, bias ? 1.0f : 0.0f, y, 1);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w.f32_data(), in,
                bias ? 1.0f : 0.0f, y, out);
}

// Chunk boundaries over `panels` for `threads` (guided): each chunk takes 1/threads of the panels
// left, rounded up to whole tiles of `tile` panels, so the first chunks are large and the last ones
// small. A thread the OS delays still leaves the tail to the others, while each chunk's stream
// starts cold only a few times per matrix: 16 fixed chunks per thread left 2-thread decode at 65-73 %
// of an 86 GB/s host's bandwidth where these read 73-79 % (q4, int8; Zen 5, docs/speed.md).
std::vector<int> guided_chunks(int panels, int threads, int tile) {
  std::vector<int> bounds{0};
  while (bounds.back() < panels) {
    const int left = panels - bounds.back();
    const int size = std::max(tile, ((left + threads - 1) / threads + tile - 1) / tile * tile);
    bounds.push_back(std::min(panels, bounds.back() + size));
  }
  return bounds;
}

}  // namespace

const detail::KernelTable& detail::active_kernels() { return kernels_for(active_isa()); }

void matmul(const float* x, int rows, const PackedMatrix& w, const float* bias, float* y) {
  if (rows <= 0) return;
  if (!x || !y) fail("matmul: null input or output buffer");
  if (w.out() <= 0) fail("matmul: the weight matrix is empty (not packed)");
  if (w.format() == WeightFormat::F32) return matmul_f32(x, rows, w, bias, y);
  const Isa isa = active_isa();
  if (isa == Isa::Scalar) return matmul_scalar(x, rows, w, bias, y);

  ThreadPool& pool = kernel_pool();
  // Per calling thread (the server may run several engines); workers reach it through this
  // reference, never by naming the thread_local (which would be their own, empty, instance).
  thread_local PreparedInput scratch;
  PreparedInput& prepared = scratch;
  auto prepare = [&] {
    detail::size_prepared(rows, w, prepared);
    if (rows >= 16 && pool.size() > 1)
      pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
        detail::prepare_rows(x, static_cast<int>(begin), static_cast<int>(end), w.in(), w, prepared, true);
      });
    else
      detail::prepare_rows(x, 0, rows, w.in(), w, prepared, true);
  };
  if (w.format() == WeightFormat::F16) {  // the activations as given (fp32)
    const detail::KernelArgs args{nullptr, &w, bias, y, rows, x};
    const detail::PanelKernel kernel = kernels_for(isa).f16;
    const int panels = w.panels();
    if (pool.size() == 1 || panels < 2) return kernel(args, 0, panels);
    const std::vector<int> bounds = guided_chunks(panels, pool.size(), 4);
    return pool.run_chunks(static_cast<int64_t>(bounds.size()) - 1,
                           [&](int64_t chunk) { kernel(args, bounds[chunk], bounds[chunk + 1]); });
  }
  if (w.format() == WeightFormat::Blocks) {
    // K-quant rows take int8 activations (kquant_dot.cpp); the other block types the fp32 ones.
    const bool int_rows = detail::has_int_dot_rows(w);
    if (int_rows) prepare();
    const detail::KernelArgs args{int_rows ? &prepared : nullptr, &w, bias, y, rows, x};
    const detail::Dot16Fn dot16 = kernels_for(isa).dot16;
    if (pool.size() == 1 || w.panels() < 2) return detail::blocks_kernel(args, 0, w.panels(), dot16);
    // Guided chunks, as the panel kernels below: since the K-quants run in integer dots, reading
    // their rows as long streams per thread beat ~16 fixed chunks per thread by 35-40 % in decode
    // (a Q4_K_M file, 2 threads, Zen 5: tg 121-127 -> 166-175 t/s); F16 / Q4_1 / Q5_1, still
    // dequantized to fp32, were no slower.
    const std::vector<int> bounds = guided_chunks(w.panels(), pool.size(), 1);
    return pool.run_chunks(static_cast<int64_t>(bounds.size()) - 1,
                           [&](int64_t chunk) { detail::blocks_kernel(args, bounds[chunk], bounds[chunk + 1], dot16); });
  }
  prepare();

  const detail::KernelTable& table = kernels_for(isa);
  if (w.format() == WeightFormat::Mixed) {
    // Each part in its own kernel, writing its columns of y; the chunks of every part in one pass
    // of the pool (guided within each part).
    struct Chunk {
      int part, begin, end;
    };
    std::vector<Chunk> chunks;
    for (std::size_t i = 0; i < w.parts().size(); ++i) {
      const std::vector<int> bounds = guided_chunks(w.parts()[i].panels(), pool.size(), 4);
      for (std::size_t c = 0; c + 1 < bounds.size(); ++c) chunks.push_back({static_cast<int>(i), bounds[c], bounds[c + 1]});
    }
    auto run = [&](const Chunk& c) {
      const PackedMatrix& part = w.parts()[c.part];
      const int first = w.part_rows()[c.part];
      const detail::KernelArgs args{&prepared, &part, bias ? bias + first : nullptr, y + first, rows, nullptr,
                                    static_cast<std::size_t>(w.out())};
      detail::panel_kernel(table, part.format())(args, c.begin, c.end);
    };
    if (pool.size() == 1) {
      for (const Chunk& c : chunks) run(c);
      return;
    }
    return pool.run_chunks(static_cast<int64_t>(chunks.size()), [&](int64_t i) { run(chunks[i]); });
  }
  const detail::PanelKernel kernel = detail::panel_kernel(table, w.format());
  const detail::KernelArgs args{&prepared, &w, bias, y, rows};
  const int panels = w.panels();
  if (pool.size() == 1 || panels < 2) return kernel(args, 0, panels);
  // Chunks of whole tiles (up to 4 panels wide), claimed dynamically so a thread that the OS
  // delays does not hold the others at a barrier.
  const std::vector<int> bounds = guided_chunks(panels, pool.size(), 4);
  pool.run_chunks(static_cast<int64_t>(bounds.size()) - 1, [&](int64_t chunk) { kernel(args, bounds[chunk], bounds[chunk + 1]); });
}

}  // namespace inferlab::fast
