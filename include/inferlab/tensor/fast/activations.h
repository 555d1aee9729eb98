// Element-wise activations on the hot path of prefill, vectorised where the CPU allows.
#pragma once
#include <cstddef>

namespace inferlab::fast {

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g); e^x by a degree-7 polynomial (~1 ulp).
void silu_mul(const float* gate, const float* up, float* out, std::size_t n);

}  // namespace inferlab::fast
