// Which SIMD code paths this CPU can run, detected once at start-up, and a ceiling a user or a
// test can lower (INFERLAB_ISA=scalar|avx2|avx512|amx, or set_isa_limit) to exercise the fallbacks.
#pragma once
#include <string>

namespace inferlab::fast {

enum class Isa {
  Scalar = 0,
  Avx2 = 1,    // AVX2 + FMA + F16C
  Avx512 = 2,  // AVX-512 F/BW/VL/DQ with BF16 (vdpbf16ps) and VNNI (vpdpbusd)
  Amx = 3,     // AVX-512 plus AMX-TILE / AMX-INT8 (tdpbssd) that the OS lets this process use
};

const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws Error naming the accepted values

// What the hardware supports (ignores the limit).
Isa detected_isa();
// What the kernels use now: min(detected, limit).
Isa active_isa();
// Lowers (or restores, with Isa::Amx) the ceiling for every later kernel call.
void set_isa_limit(Isa limit);

// How the one-row decode tiles (one stream's matmuls: bf16, f16 and the integer formats) prefetch
// their weights, whose lines are read once. nta: AVX-512 with prefetchnta, which keeps them out of
// the L2 (on a Zen 5 it read 3-11 % more of the memory bandwidth than prefetcht0); AVX2 with
// prefetcht0 alone, as tuned on a Zen 1. t0: prefetcht0, each line also asked for 8 KiB further
// ahead into the L2 (prefetcht1), the int8 / q4 / q5_0 scales too. On Intel (Xeon, Emerald Rapids)
// prefetchnta reads less than half as much (it fills the L1 only and holds one of its few fill
// buffers until the line arrives; the L2 streamer never sees the stream: 6-9 GB/s of 17), and t0
// read 84 -> 91 % of the bandwidth on AVX-512 (Q4_0) and 70-80 -> 85-96 % on AVX2 (docs/speed.md).
// nta-panels: as nta, but AVX-512's one int8 / q4 / q5_0 row runs two 512-bit panels per tile (as
// at 6b6815f) instead of one panel in two 256-bit halves: on a Zen 5 the halves decoded at
// 0.73-0.80x of it, on a Zen 4 it decoded at 0.62-0.71x of the halves (issue 46, docs/speed.md).
// So the default is nta-panels on AMD family 1Ah and later (Zen 5), nta on earlier AMD CPUs (Zen 4,
// and the AVX2-only Zen 1-3, whose AVX2 tiles take nta and nta-panels alike), t0 on the others;
// INFERLAB_PREFETCH=t0|nta|nta-panels or set_stream_prefetch chooses (the arithmetic is the same).
enum class StreamPrefetch { T0 = 0, Nta = 1, NtaPanels = 2 };
const char* stream_prefetch_name(StreamPrefetch hint);
StreamPrefetch parse_stream_prefetch(const std::string& name);  // throws Error naming the accepted values
StreamPrefetch default_stream_prefetch();                       // by CPU vendor and family, as above
StreamPrefetch active_stream_prefetch();                        // INFERLAB_PREFETCH, else the default
void set_stream_prefetch(StreamPrefetch hint);

// One line for reports: "avx512 (avx512f avx512bw avx512_bf16 avx512_vnni avx2 fma f16c), one-row
// prefetch t0" (the prefetch only where AVX2 or more is active).
std::string cpu_features_line();

}  // namespace inferlab::fast
