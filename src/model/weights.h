// From checkpoint tensors to packed matmul weights: which format a load option means, and packing
// straight from the stored bytes (bf16 is never widened to fp32 on the way). Model layer: it joins
// the loading layer's TensorView with the tensor layer's packed formats, for the WeightLoader.
#pragma once
#include <string>

#include "inferlab/tensor/fast/packed.h"
#include "inferlab/loading/safetensors.h"

namespace inferlab::fast {

// "auto" (or empty): bf16 checkpoints stay bf16, f32 stays f32, f16 becomes f32 (exact);
// otherwise the named format (f32, bf16, int8, q4), quantized at load.
WeightFormat choose_format(const std::string& option, DType stored);
// The same for a view: a GGUF block type (view.ggml_type) under "auto" is Blocks, i.e. packed as
// stored (PackedMatrix::from_ggml); F32 stays f32.
WeightFormat choose_format(const std::string& option, const TensorView& view);

// view: a 2-D tensor [out][in] (nn.Linear layout). Once packed, the tensor's pages of a
// memory-mapped file are dropped from this process (they are re-read from the file if touched),
// so the peak resident size is the packed weights, not packed + file.
PackedMatrix pack_tensor(const TensorView& view, int out, int in, WeightFormat format);
// view: a GPT-2 Conv1D weight stored [in][out]; packed as [out][in].
PackedMatrix pack_transposed(const TensorView& view, int in, int out, WeightFormat format);

}  // namespace inferlab::fast
