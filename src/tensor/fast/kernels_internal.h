// Between the dispatcher (matmul.cpp) and the per-instruction-set kernel files.
#pragma once
#include "inferlab/tensor/fast/packed.h"

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

// One activation row rounded to bf16 / quantized to q8 blocks, exactly as prepare_rows' scalar
// code does (the kernels' results must not depend on which of them prepared the row).
using Bf16RowFn = void (*)(const float* src, int in, int in_padded, uint16_t* dst);
using Q8RowFn = void (*)(const float* src, int in, int blocks, int8_t* dst, float* scale, int32_t* sum);

struct KernelTable {
  PanelKernel bf16, q8, q4;
  Bf16RowFn bf16_row = nullptr;  // null: the scalar code in prepare_rows
  Q8RowFn q8_row = nullptr;
  bool bf16_as_f32 = false;  // the bf16 kernel reads PreparedInput::bf16_f32 (filled by prepare_rows)
};

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
const KernelTable& active_kernels();  // for active_isa()

}  // namespace inferlab::fast::detail

namespace inferlab::fast::detail {
// prepare_input in two steps, so that many rows can be prepared in parallel.
// Also sizes what the active instruction set's kernels read besides (PreparedInput::bf16_f32).
void size_prepared(int rows, const PackedMatrix& w, PreparedInput& prepared);
// simd: the active instruction set's row functions (matmul); false: the scalar code (the oracle).
void prepare_rows(const float* x, int row_begin, int row_end, int in, const PackedMatrix& w, PreparedInput& prepared,
                  bool simd = false);
}  // namespace inferlab::fast::detail
