// Which SIMD code paths this CPU can run, detected once at start-up, and a ceiling a user or a
// test can lower (INFERLAB_ISA=scalar|avx2|avx512, or set_isa_limit) to exercise the fallbacks.
#pragma once
#include <string>

namespace inferlab::fast {

enum class Isa {
  Scalar = 0,
  Avx2 = 1,    // AVX2 + FMA + F16C
  Avx512 = 2,  // AVX-512 F/BW/VL/DQ with BF16 (vdpbf16ps) and VNNI (vpdpbusd)
};

const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws Error naming the accepted values

// What the hardware supports (ignores the limit).
Isa detected_isa();
// What the kernels use now: min(detected, limit).
Isa active_isa();
// Lowers (or restores, with Isa::Avx512) the ceiling for every later kernel call.
void set_isa_limit(Isa limit);

// One line for reports: "avx512 (avx512f avx512bw avx512_bf16 avx512_vnni avx2 fma f16c)".
std::string cpu_features_line();

}  // namespace inferlab::fast
