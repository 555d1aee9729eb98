// Course step 1: a Linear(4 -> 6) applied to a (2, 3, 4) tensor; the layer acts on the last axis,
// so the two leading axes are just 6 rows of one matrix multiply.
#include <cmath>
#include <cstdio>
#include <random>

#include "inferlab/tensor/kernels.h"

int main() {
  const int batch = 2, seq = 3, in = 4, out = 6;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  // nn.Linear's default init: uniform(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  std::uniform_real_distribution<float> init(-1.0f / std::sqrt(float(in)), 1.0f / std::sqrt(float(in)));

  inferlab::LinearWeight layer;
  layer.in = in;
  layer.out = out;
  auto weight = std::make_shared<std::vector<float>>(out * in);
  for (auto& w : *weight) w = init(rng);
  layer.weight = weight;
  layer.bias.resize(out);
  for (auto& b : layer.bias) b = init(rng);

  std::vector<float> x(batch * seq * in), y(batch * seq * out);
  for (auto& v : x) v = normal(rng);
  inferlab::linear(x.data(), batch * seq, layer, y.data());

  std::printf("input (%d, %d, %d) float32 cpu\n", batch, seq, in);
  std::printf("weight (%d, %d) float32 cpu\n", out, in);
  std::printf("output (%d, %d, %d) float32 cpu\n", batch, seq, out);
  // The shape check of the course's assert, plus the value at one position by hand.
  float expect = layer.bias[0];
  for (int i = 0; i < in; ++i) expect += x[i] * (*weight)[i];
  if (y.size() != 2u * 3 * 6 || std::abs(y[0] - expect) > 1e-5f) {
    std::fprintf(stderr, "linear gave the wrong result\n");
    return 1;
  }
  return 0;
}
