#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "inferlab/tensor/fast/activations.h"
#include "inferlab/tensor/fast/cpu.h"
#include "isa_paths.h"

using namespace inferlab::fast;
using namespace inferlab::test;

// The vectorised silu(gate) * up against std::exp in double, over ordinary values, the tails
// where e^-g under/overflows, and lengths off the vector width.
TEST(Activations, SiluMulMatchesTheLibraryExp) {
  IsaGuard guard;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (std::size_t n : {1u, 15u, 16u, 17u, 4864u}) {
    std::vector<float> gate(n), up(n), out(n);
    for (auto& v : gate) v = dist(rng);
    for (auto& v : up) v = dist(rng);
    if (n > 4) gate[0] = -120.0f, gate[1] = 120.0f, gate[2] = -88.0f, gate[3] = 0.0f;
    for (Isa isa : runnable_isas()) {
      set_isa_limit(isa);
      silu_mul(gate.data(), up.data(), out.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const double expected = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i];
        ASSERT_NEAR(out[i], expected, 2e-6 * std::fabs(expected) + 1e-30) << "gate " << gate[i] << " isa " << isa_name(active_isa());
      }
    }
  }
}
