#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "inferlab/tensor/fast/argmax.h"
#include "inferlab/tensor/fast/cpu.h"
#include "isa_paths.h"

using namespace inferlab::fast;
using namespace inferlab::test;

namespace {
std::size_t first_maximum(const std::vector<float>& x) {
  return static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
}
}  // namespace

// Every instruction-set path gives std::max_element's answer: lengths around the lanes and the
// four sets of them, ties in different lanes, maxima in the tail, NaNs (first or not), infinities.
TEST(Argmax, EveryPathGivesTheFirstMaximum) {
  IsaGuard guard;
  std::mt19937 rng(11);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (Isa isa : runnable_isas()) {
    set_isa_limit(isa);
    for (std::size_t n = 1; n < 200; ++n)
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<float> x(n);
        for (float& v : x) v = static_cast<float>(rng() % 7) - 3.0f;  // many ties
        if (trial % 3 == 1) x[rng() % n] = nan;
        if (trial % 4 == 2) x[rng() % n] = inf;
        if (trial % 5 == 3) std::fill(x.begin(), x.end(), -inf);
        if (trial == 7) x[0] = nan;
        ASSERT_EQ(argmax(x.data(), n), first_maximum(x)) << "n " << n << " trial " << trial << " isa " << isa_name(active_isa());
      }
    // A row of logits, its maximum twice: in a lane set's middle and near the end.
    std::vector<float> logits(151936);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 7919) % 1000) * 0.001f;
    logits[150001] = logits[151935] = 5.0f;
    EXPECT_EQ(argmax(logits.data(), logits.size()), 150001u) << isa_name(active_isa());
    logits[77] = 5.0f;
    EXPECT_EQ(argmax(logits.data(), logits.size()), 77u) << isa_name(active_isa());
    logits[0] = 5.0f;  // a tie with x[0], which every lane starts from
    EXPECT_EQ(argmax(logits.data(), logits.size()), 0u) << isa_name(active_isa());
  }
}
