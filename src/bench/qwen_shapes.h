// The matmul shapes of Qwen2.5-0.5B as the engine lays its layers out (q|k|v and gate|up fused
// into one matmul each): what the probes' sgemm and the kernel benchmark measure.
#pragma once
#include <string_view>

namespace inferlab::bench {

struct MatmulShape {
  const char* name;
  int out, in;
};
inline constexpr MatmulShape kQwenShapes[] = {{"qkv", 1152, 896},     {"q", 896, 896},     {"kv", 128, 896},
                                              {"o", 896, 896},        {"gate_up", 9728, 896}, {"down", 896, 4864},
                                              {"lm_head", 151936, 896}};

// Shapes that run as a GEMM over the prompt in prefill (the lm_head runs once per prompt; q and
// kv alone are only parts of the fused qkv).
inline bool is_prefill_shape(std::string_view name) { return name != "lm_head" && name != "q" && name != "kv"; }

}  // namespace inferlab::bench
