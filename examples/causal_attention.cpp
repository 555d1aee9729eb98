// Course step 2: causal scaled-dot-product attention on (1, 2, 4, 8) Q/K/V. Changing the last
// value row leaves the first three outputs unchanged: position t only looks at positions <= t.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "inferlab/tensor/kernels.h"

namespace {

constexpr int kHeads = 2, kSeq = 4, kDim = 8;
using Tensor = std::vector<float>;  // [1][heads][seq][dim]

float& at(Tensor& t, int h, int s, int d) { return t[(h * kSeq + s) * kDim + d]; }
float at(const Tensor& t, int h, int s, int d) { return t[(h * kSeq + s) * kDim + d]; }

Tensor causal_sdpa(const Tensor& q, const Tensor& k, const Tensor& v) {
  Tensor out(q.size(), 0.0f);
  const float scale = 1.0f / std::sqrt(float(kDim));
  for (int h = 0; h < kHeads; ++h)
    for (int t = 0; t < kSeq; ++t) {
      float scores[kSeq];  // one row of the (1, 2, 4, 4) score matrix, masked above the diagonal
      for (int j = 0; j <= t; ++j) {
        float dot = 0;
        for (int d = 0; d < kDim; ++d) dot += at(q, h, t, d) * at(k, h, j, d);
        scores[j] = dot * scale;
      }
      inferlab::softmax(scores, t + 1);
      for (int j = 0; j <= t; ++j)
        for (int d = 0; d < kDim; ++d) at(out, h, t, d) += scores[j] * at(v, h, j, d);
    }
  return out;
}

}  // namespace

int main() {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  Tensor q(kHeads * kSeq * kDim), k(q.size()), v(q.size());
  for (Tensor* t : {&q, &k, &v})
    for (auto& x : *t) x = normal(rng);
  Tensor changed = v;
  for (int h = 0; h < kHeads; ++h)
    for (int d = 0; d < kDim; ++d) at(changed, h, kSeq - 1, d) += 10;

  const Tensor base = causal_sdpa(q, k, v), moved = causal_sdpa(q, k, changed);
  float first_three = 0, last = 0;
  for (int h = 0; h < kHeads; ++h)
    for (int t = 0; t < kSeq; ++t)
      for (int d = 0; d < kDim; ++d) {
        const float diff = std::abs(at(base, h, t, d) - at(moved, h, t, d));
        (t < kSeq - 1 ? first_three : last) = std::max(t < kSeq - 1 ? first_three : last, diff);
      }
  std::printf("Q/K/V: (1, %d, %d, %d) scores: (1, %d, %d, %d) output: (1, %d, %d, %d)\n", kHeads, kSeq, kDim, kHeads,
              kSeq, kSeq, kHeads, kSeq, kDim);
  std::printf("first three positions: max change %g (unchanged); last position: max change %g\n", first_three, last);
  return first_three == 0.0f && last > 0.0f ? 0 : 1;
}
