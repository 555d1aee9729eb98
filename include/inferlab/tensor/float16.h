// Conversions between float and the 16-bit formats checkpoints store (bf16, IEEE half).
// One implementation for the loader and the kernels; round to nearest even, like the hardware.
#pragma once
#include <cstdint>

namespace inferlab {

float bf16_to_f32(uint16_t v);
uint16_t f32_to_bf16(float v);  // round to nearest even; NaN stays NaN
float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float v);   // round to nearest even with subnormals, as F16C's vcvtps2ph

}  // namespace inferlab
