// The experiment behind dropping Highway (docs/speed.md, "Highway: measured, not used"):
// SwiGLU's silu(gate) * up written once with Highway (dynamic dispatch, AVX2 and AVX-512), with
// Highway's own Exp and with inferlab's exp polynomial, timed beside inferlab's hand-written twins
// (src/tensor/fast/activations.cpp) on 4 rows of Qwen2.5-0.5B's intermediate size.
// Not part of the build (Highway is not a dependency); to rerun it:
//   apt-get install libhwy-dev
//   g++ -std=c++20 -O2 -Ibench -Iinclude bench/highway_experiment.cpp build/src/libinferlab_core.a \
//       -lhwy -lfmt -lopenblas -lpthread -o build/highway_experiment
//   build/highway_experiment avx512; INFERLAB_ISA=avx2 build/highway_experiment avx2
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "highway_experiment.cpp"
#include <hwy/foreach_target.h>
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace exp_hwy { namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// inferlab's exp polynomial written once: degree-7 Taylor on |r| <= ln2/2, 2^n in two exact halves
// (portable: no scalef), as exp256 does.
template <class D, class V>
HWY_INLINE V OurExp(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Min(hn::Max(x, hn::Set(d, -103.0f)), hn::Set(d, 88.7f));
  const auto n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto p = hn::Set(d, 1.0f / 5040);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 720));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto ni = hn::ConvertTo(di, n);
  const auto half = hn::ShiftRight<1>(ni);
  const auto rest = hn::Sub(ni, half);
  const auto s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(half, hn::Set(di, 127))));
  const auto s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(rest, hn::Set(di, 127))));
  return hn::Mul(hn::Mul(p, s1), s2);
}
void SiluMulOurs(const float* gate, const float* up, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const auto one = hn::Set(d, 1.0f);
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(d, gate + i);
    const auto e = OurExp(d, hn::Neg(g));
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, e)), hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
void SiluMul(const float* gate, const float* up, float* out, size_t n) {
  const hn::ScalableTag<float> d;
  const auto one = hn::Set(d, 1.0f);
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(d, gate + i);
    const auto e = hn::Exp(d, hn::Neg(g));
    hn::StoreU(hn::Mul(hn::Div(g, hn::Add(one, e)), hn::LoadU(d, up + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
}}  // namespace exp_hwy::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "inferlab/tensor/fast/activations.h"
#include "inferlab/tensor/fast/cpu.h"
namespace exp_hwy {
HWY_EXPORT(SiluMul);
HWY_EXPORT(SiluMulOurs);
}
int main(int argc, char** argv) {
  const size_t n = 4864 * 4;  // 4 rows of Qwen2.5-0.5B's intermediate size
  std::vector<float> g(n), u(n), a(n), b(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0, 3);
  for (size_t i = 0; i < n; ++i) g[i] = dist(rng), u[i] = dist(rng);
  const char* isa = argc > 1 ? argv[1] : "avx512";
  if (std::string(isa) == "avx2") hwy::SetSupportedTargetsForTest(HWY_AVX2 | HWY_SCALAR);
  const int reps = 20000;
  auto time = [&](auto fn) {
    double best = 1e30;
    for (int trial = 0; trial < 7; ++trial) {
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps / 7; ++r) fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best / (reps / 7) * 1e6;
  };
  double ours = 0, hwyt = 0, port = 0;
  for (int round = 0; round < 3; ++round) {
    ours = time([&] { inferlab::fast::silu_mul(g.data(), u.data(), a.data(), n); });
    hwyt = time([&] { HWY_DYNAMIC_DISPATCH(exp_hwy::SiluMul)(g.data(), u.data(), b.data(), n); });
    port = time([&] { HWY_DYNAMIC_DISPATCH(exp_hwy::SiluMulOurs)(g.data(), u.data(), b.data(), n); });
    double maxrel = 0;
    for (size_t i = 0; i < n; ++i) maxrel = std::max(maxrel, (double)std::fabs(a[i] - b[i]) / (std::fabs(a[i]) + 1e-30));
    std::printf("%s: inferlab %s %.2f us, highway (%s) %.2f us, ratio hwy/ours %.3f, max rel diff %.2e; our polynomial in highway %.2f us ratio %.3f\n", isa,
                inferlab::fast::isa_name(inferlab::fast::active_isa()), ours, hwy::TargetName(hwy::SupportedAndGeneratedTargets().front()), hwyt, hwyt / ours, maxrel, port, port / ours);
  }
}
#endif
