// ggml's tensor types as GGUF files store them: names, block geometry, and dequantization of rows
// of blocks to fp32 (written from the block layouts of the GGUF format description). The matmul
// runs the block formats that have no exact repacking into our panels (packed.h) straight from
// these bytes, dequantizing one weight row at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

namespace inferlab::fast {

// ggml_type ids (the numbers GGUF tensor infos hold).
enum GgmlType : uint32_t {
  kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7, kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlBF16 = 30,
};

// "Q4_K", "IQ2_XS", ... for every id ggml has defined; nullptr for an id it never had.
const char* ggml_type_name(uint32_t type);

struct GgmlBlock {
  int elements;  // weights per block (1 for F32/F16/BF16)
  int bytes;     // bytes per block
};
// Geometry of the types inferlab runs (the kGgml* above); nullopt for every other type.
std::optional<GgmlBlock> ggml_block(uint32_t type);
// "F32, F16, BF16, Q4_0, ..." for messages.
const char* ggml_supported_types();

// Bytes of one row of n weights (n a multiple of the block's elements).
std::size_t ggml_row_bytes(uint32_t type, int64_t n);

// src: one row of n weights in `type` (a supported type, n a multiple of its block) -> dst[n].
void dequantize_ggml_row(uint32_t type, const uint8_t* src, int64_t n, float* dst);

}  // namespace inferlab::fast
