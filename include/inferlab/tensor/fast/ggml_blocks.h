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
  kGgmlQ4_K = 12, kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlBF16 = 30, kGgmlMXFP4 = 39,
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

// Q4_K / Q5_K: sub-block j's (0-7) 6-bit scale and min from a super-block's 12 packed bytes: bytes
// 0-3 hold scales 0-3 (low 6 bits), 4-7 mins 0-3, 8-11 the low nibbles of scales / mins 4-7, whose
// top 2 bits are the high bits of bytes 0-3 (scales) and 4-7 (mins).
inline void ggml_k4_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace inferlab::fast
