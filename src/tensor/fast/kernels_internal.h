// Between the dispatcher (matmul.cpp) and the per-instruction-set kernel files.
#pragma once
#include "inferlab/fast/packed.h"

namespace inferlab::fast::detail {

struct KernelArgs {
  const PreparedInput* in = nullptr;
  const PackedMatrix* w = nullptr;
  const float* bias = nullptr;  // may be null
  float* y = nullptr;           // [rows][w->out()]
  int rows = 0;
};

// Each computes y for output panels [panel_begin, panel_end) and every row.
using PanelKernel = void (*)(const KernelArgs& args, int panel_begin, int panel_end);

struct KernelTable {
  PanelKernel bf16, q8, q4;
};

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();

}  // namespace inferlab::fast::detail

namespace inferlab::fast::detail {
// prepare_input in two steps, so that many rows can be prepared in parallel.
void size_prepared(int rows, const PackedMatrix& w, PreparedInput& prepared);
void prepare_rows(const float* x, int row_begin, int row_end, int in, const PackedMatrix& w, PreparedInput& prepared);
}  // namespace inferlab::fast::detail
