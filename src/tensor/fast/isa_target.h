// Regions of code compiled for an instruction set beyond the build's baseline, the same way in GCC
// (`#pragma GCC target`) and clang (which ignores that pragma: a target attribute on every function
// of the region instead). Code in a region runs only after runtime detection (cpu.h).
//
//   INFERLAB_TARGET_BEGIN("avx2,fma")
//   ... functions ...
//   INFERLAB_TARGET_END
#pragma once

#define INFERLAB_TARGET_STRINGIFY(x) #x
#if defined(__clang__)
#define INFERLAB_TARGET_BEGIN(isa) \
  _Pragma(INFERLAB_TARGET_STRINGIFY(clang attribute push(__attribute__((target(isa))), apply_to = function)))
#define INFERLAB_TARGET_END _Pragma("clang attribute pop")
#else
#define INFERLAB_TARGET_BEGIN(isa) _Pragma("GCC push_options") _Pragma(INFERLAB_TARGET_STRINGIFY(GCC target(isa)))
#define INFERLAB_TARGET_END _Pragma("GCC pop_options")
#endif
