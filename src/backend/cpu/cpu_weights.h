// The CPU backend's weights: a Matrix held as f32 rows or as packed panels (src/tensor/fast), and
// packing straight from a checkpoint's stored bytes (bf16 is never widened to fp32 on the way).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/backend/backend.h"
#include "inferlab/loading/safetensors.h"
#include "inferlab/tensor/fast/packed.h"

namespace inferlab::cpu {

// Exactly one of f32 / packed is set.
class CpuMatrix final : public Matrix {
 public:
  CpuMatrix(int rows, int cols, std::shared_ptr<const std::vector<float>> f32)
      : rows_(rows), cols_(cols), f32_(std::move(f32)) {}
  CpuMatrix(int rows, int cols, std::shared_ptr<const fast::PackedMatrix> packed)
      : rows_(rows), cols_(cols), packed_(std::move(packed)) {}
  int rows() const override { return rows_; }
  int cols() const override { return cols_; }
  std::string format() const override;
  void add_bytes_by_format(std::map<std::string, std::size_t>& by_format) const override;

  const std::vector<float>* f32() const { return f32_.get(); }
  const fast::PackedMatrix* packed() const { return packed_.get(); }

 private:
  int rows_, cols_;
  std::shared_ptr<const std::vector<float>> f32_;
  std::shared_ptr<const fast::PackedMatrix> packed_;
};

// A Matrix of another backend given to this one is a programming error, named here.
const CpuMatrix& cpu_matrix(const Matrix& m);

// "auto" (or empty): bf16 checkpoints stay bf16, f32 stays f32, f16 becomes f32 (exact), a GGUF
// block type stays as stored (Blocks); otherwise the named format (f32, bf16, int8, q4).
fast::WeightFormat choose_format(const std::string& option, const TensorView& view);

// view: [rows][cols] (nn.Linear layout), or transposed: stored [cols][rows] (GPT-2's Conv1D).
// Once read, the tensor's pages of a memory-mapped file are dropped from this process (re-read
// from the file if touched), so the peak resident size is the packed weights, not packed + file.
std::shared_ptr<const CpuMatrix> load_matrix(const TensorView& view, int rows, int cols, const std::string& option,
                                             bool transposed);
std::shared_ptr<const CpuMatrix> concat_rows(std::span<const MatrixPtr> parts);

}  // namespace inferlab::cpu
