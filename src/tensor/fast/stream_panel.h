// The software prefetch of a tile's panel streams, shared by the AVX2 and the AVX-512 kernels.
// Include it inside the file's target region (INFERLAB_TARGET_BEGIN): its step, a lambda of that
// region, is inlined into it, which GCC allows only between functions of the same target; internal
// linkage keeps the copies apart.
#pragma once
#include <xmmintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tensor/fast/kernels_internal.h"

namespace inferlab::fast::detail {
namespace {

// _mm_prefetch with the hint as a template argument. GCC's _mm_prefetch takes an enum _mm_hint and
// clang's a constant, so neither spelling compiles on both; both expand to this builtin, whose
// locality is the hint for these (NTA 0, T1 2, T0 3). GCC 12 also drops _mm_prefetch without a
// word when it sits in an always_inline lambda (such as stream_panel's steps); the builtin stays.
template <int Hint>
inline void prefetch_line(const void* p) {
  __builtin_prefetch(p, 0, Hint);
}

// The steps of one of a tile's NV panel streams, Unit bytes each: step(i, ahead, far) with the
// prefetch offsets Ahead and Far (0: no far prefetch) from step i's line. Once an offset runs past
// the panel's end it moves on to the start of the panel NV further, which this thread's next tile
// streams (panels are contiguous), so no tile starts cold.
template <int NV, int Unit, int Ahead, int Far, typename Step>
inline __attribute__((always_inline)) void stream_panel(int steps, std::size_t panel_bytes, Step&& step) {
  static_assert(Far == 0 || Far >= Ahead, "the far prefetch runs past the panel's end before the near one");
  const std::ptrdiff_t skip = (NV - 1) * static_cast<std::ptrdiff_t>(panel_bytes);
  const int tail = std::max(0, steps - Ahead / Unit), far_tail = Far > 0 ? std::max(0, steps - Far / Unit) : tail;
  for (int i = 0; i < far_tail; ++i) step(i, Ahead, Far);
  for (int i = far_tail; i < tail; ++i) step(i, Ahead, Far + skip);
  for (int i = tail; i < steps; ++i) step(i, Ahead + skip, Far + skip);
}

// A one-panel integer tile's prefetch at the start of block b, whose codes are at `block`
// (BlockBytes) and whose panel's scales start at `scales` (ScaleBytes per block): every line of the
// block Near bytes ahead with Hint; with Far > 0 (one decode row under the t0 hint) also Far bytes
// ahead into the L2 and, once per line of scales, the scale stream kSingleRowScaleBytes ahead. Past
// a panel's end lie the next panel's codes and scales, which this thread's next tile reads.
template <int Hint, int Near, int Far, int BlockBytes, int ScaleBytes>
inline __attribute__((always_inline)) void prefetch_block(const uint8_t* block, const uint8_t* scales, int b) {
  #pragma GCC unroll 8
  for (int line = 0; line < BlockBytes; line += 64) prefetch_line<Hint>(block + line + Near);
  if constexpr (Far > 0) {
    #pragma GCC unroll 8
    for (int line = 0; line < BlockBytes; line += 64) prefetch_line<_MM_HINT_T1>(block + line + Far);
    constexpr int blocks_per_line = ScaleBytes >= 64 ? 1 : 64 / ScaleBytes;
    if (b % blocks_per_line == 0) prefetch_line<Hint>(scales + static_cast<std::size_t>(b) * ScaleBytes + kSingleRowScaleBytes);
  }
}

}  // namespace
}  // namespace inferlab::fast::detail
