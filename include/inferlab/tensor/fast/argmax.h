// The index of a row's first maximum (what greedy decoding picks from the logits), vectorised
// where the CPU allows: one pass that keeps each lane's maximum and where it was.
#pragma once
#include <cstddef>

namespace inferlab::fast {

// The first i with x[i] >= every x[j] (std::max_element's answer, torch.argmax's): a NaN never
// wins unless it is x[0], which then does. n must be at least 1.
std::size_t argmax(const float* x, std::size_t n);

}  // namespace inferlab::fast
