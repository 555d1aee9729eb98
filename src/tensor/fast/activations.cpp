#include "inferlab/tensor/fast/activations.h"

#include <cmath>

#include "inferlab/tensor/fast/cpu.h"
#include "tensor/fast/simd_math.h"
#include "tensor/fast/isa_target.h"

namespace inferlab::fast {

namespace {
// Elements [from, n): the SIMD versions' tails and the scalar path.
void silu_mul_scalar(const float* gate, const float* up, float* out, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
}  // namespace

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
// GCC 12 flags its own _mm512_undefined_* helpers inside the intrinsic headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {
void silu_mul_avx512(const float* gate, const float* up, float* out, std::size_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = detail::exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  silu_mul_scalar(gate, up, out, i, n);
}
}  // namespace
#pragma GCC diagnostic pop
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma")
namespace {
void silu_mul_avx2(const float* gate, const float* up, float* out, std::size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = detail::exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  silu_mul_scalar(gate, up, out, i, n);
}
}  // namespace
INFERLAB_TARGET_END

void silu_mul(const float* gate, const float* up, float* out, std::size_t n) {
  if (active_isa() >= Isa::Avx512) return silu_mul_avx512(gate, up, out, n);
  if (active_isa() == Isa::Avx2) return silu_mul_avx2(gate, up, out, n);
  silu_mul_scalar(gate, up, out, 0, n);
}

}  // namespace inferlab::fast
