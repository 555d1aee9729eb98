#include "inferlab/tensor/fast/probes.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <unistd.h>
#include <vector>

#include "inferlab/tensor/fast/cpu.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/isa_target.h"
#include "tensor/fast/kernels_internal.h"

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

namespace inferlab::fast {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

INFERLAB_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,avx2,fma,f16c")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {
// S streams of `part` floats each (part a multiple of 64), four loads in flight per step.
template <int S>
float sum_streams_avx512(const float* base, std::size_t part) {
  constexpr int U = 4 / S;  // lines per stream per step
  __m512 acc[4];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t i = 0; i < part; i += 16 * U)
    #pragma GCC unroll 4
    for (int j = 0; j < S; ++j)
      #pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[j * U + u] = _mm512_add_ps(acc[j * U + u], _mm512_load_ps(base + j * part + i + 16 * u));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

void triad_avx512(float* a, const float* b, const float* c, float scalar, std::size_t n) {
  const __m512 s = _mm512_set1_ps(scalar);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(a + i, _mm512_fmadd_ps(s, _mm512_load_ps(c + i), _mm512_load_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

// 12 named accumulators (more than latency x throughput), kept in registers: the loop runs at
// the instruction's issue rate.
#define INFERLAB_PEAK_LOOP(TYPE, ZERO, OP, REDUCE)                                   \
  TYPE a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO, a4 = ZERO, a5 = ZERO, a6 = ZERO, \
       a7 = ZERO, a8 = ZERO, a9 = ZERO, a10 = ZERO, a11 = ZERO;                     \
  for (long it = 0; it < iterations; ++it) {                                        \
    a0 = OP(a0); a1 = OP(a1); a2 = OP(a2); a3 = OP(a3); a4 = OP(a4); a5 = OP(a5);   \
    a6 = OP(a6); a7 = OP(a7); a8 = OP(a8); a9 = OP(a9); a10 = OP(a10); a11 = OP(a11); \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5)); \
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11)); \
  }                                                                                 \
  return static_cast<double>(REDUCE(a0) + REDUCE(a1) + REDUCE(a2) + REDUCE(a3) + REDUCE(a4) + REDUCE(a5) + \
                             REDUCE(a6) + REDUCE(a7) + REDUCE(a8) + REDUCE(a9) + REDUCE(a10) + REDUCE(a11));

constexpr int kPeakAccumulators = 12;

double bf16_loop(long iterations) {
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
#define OP(a) _mm512_dpbf16_ps(a, x, y)
  INFERLAB_PEAK_LOOP(__m512, _mm512_setzero_ps(), OP, _mm512_reduce_add_ps)
#undef OP
}
double fp32_loop(long iterations) {
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-9f);
#define OP(a) _mm512_fmadd_ps(x, y, a)
  INFERLAB_PEAK_LOOP(__m512, _mm512_setzero_ps(), OP, _mm512_reduce_add_ps)
#undef OP
}
// The lanes wrap around in long runs (harmless: the sum only keeps the loop alive), so they are
// added outside int, as the AVX2 loop's reduce_lanes does: _mm512_reduce_add_epi32 adds ints in C,
// and that overflow is undefined (UBSan).
double reduce_lanes(__m512i v) {
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, v);
  double s = 0;
  for (int32_t lane : lanes) s += lane;
  return s;
}
double int8_loop(long iterations) {
  const __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(1);
#define OP(a) _mm512_dpbusd_epi32(a, x, y)
  INFERLAB_PEAK_LOOP(__m512i, _mm512_setzero_si512(), OP, reduce_lanes)
#undef OP
}
#undef INFERLAB_PEAK_LOOP
}  // namespace
#pragma GCC diagnostic pop
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("amx-tile,amx-int8")
namespace {
// AMX's int8 peak: tdpbssd on whole tiles (16 x 16 int32 += 16 x 64 int8 times 64 x 16), into four
// accumulator tiles so that no multiply waits for the one before.
// Tiles 0-3 the accumulators, 4 and 5 the operands: every one 16 rows x 64 bytes.
detail::AmxTileConfig peak_tiles() {
  detail::AmxTileConfig c;
  for (int t = 0; t < 6; ++t) c.tile(t, 16, 64);
  return c;
}
double amx_int8_loop(long iterations) {
  static const detail::AmxTileConfig config = peak_tiles();
  alignas(64) static const int8_t ones[16 * 64] = {};
  alignas(64) int32_t out[16 * 16];
  _tile_loadconfig(&config);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (long i = 0; i < iterations; ++i) {
    _tile_dpbssd(0, 4, 5);
    _tile_dpbssd(1, 4, 5);
    _tile_dpbssd(2, 4, 5);
    _tile_dpbssd(3, 4, 5);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}
}  // namespace
INFERLAB_TARGET_END

INFERLAB_TARGET_BEGIN("avx2,fma")
namespace {
// The same with 256-bit loads, optionally with software prefetch 4 KiB / S ahead of each stream
// (and, with T0AndT1, the one-row tiles' kSingleRowFarBytes into the L2): on some CPUs (Zen 1) the hardware prefetcher alone reads
// well below what the memory delivers, and on an Emerald Rapids Xeon the decode kernels' second,
// farther prefetch read more than t0 alone (the decode kernels prefetch so too).
template <int S, ReadPrefetch Prefetch>
float sum_streams_avx2(const float* base, std::size_t part) {
  constexpr int U = 4 / S;
  constexpr std::size_t ahead = 1024 / S, far = detail::kSingleRowFarBytes / sizeof(float);  // floats
  __m256 acc[4];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t i = 0; i < part; i += 16 * U)
    #pragma GCC unroll 4
    for (int j = 0; j < S; ++j)
      #pragma GCC unroll 4
      for (int u = 0; u < U; ++u) {
        const float* line = base + j * part + i + 16 * u;
        if constexpr (Prefetch != ReadPrefetch::None) _mm_prefetch(reinterpret_cast<const char*>(line + ahead), _MM_HINT_T0);
        if constexpr (Prefetch == ReadPrefetch::T0AndT1) _mm_prefetch(reinterpret_cast<const char*>(line + far), _MM_HINT_T1);
        acc[j * U + u] = _mm256_add_ps(acc[j * U + u], _mm256_add_ps(_mm256_load_ps(line), _mm256_load_ps(line + 8)));
      }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}

void triad_avx2(float* a, const float* b, const float* c, float scalar, std::size_t n) {
  const __m256 s = _mm256_set1_ps(scalar);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(a + i, _mm256_fmadd_ps(s, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  for (; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

double reduce_lanes(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  double s = 0;
  for (float x : lanes) s += x;
  return s;
}
double reduce_lanes(__m256i v) {
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  double s = 0;
  for (int32_t x : lanes) s += x;
  return s;
}

#define INFERLAB_PEAK_LOOP(TYPE, ZERO, OP)                                          \
  TYPE a0 = ZERO, a1 = ZERO, a2 = ZERO, a3 = ZERO, a4 = ZERO, a5 = ZERO, a6 = ZERO, \
       a7 = ZERO, a8 = ZERO, a9 = ZERO, a10 = ZERO, a11 = ZERO;                     \
  for (long it = 0; it < iterations; ++it) {                                        \
    a0 = OP(a0); a1 = OP(a1); a2 = OP(a2); a3 = OP(a3); a4 = OP(a4); a5 = OP(a5);   \
    a6 = OP(a6); a7 = OP(a7); a8 = OP(a8); a9 = OP(a9); a10 = OP(a10); a11 = OP(a11); \
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5)); \
    __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11)); \
  }                                                                                 \
  return reduce_lanes(a0) + reduce_lanes(a1) + reduce_lanes(a2) + reduce_lanes(a3) + reduce_lanes(a4) + \
         reduce_lanes(a5) + reduce_lanes(a6) + reduce_lanes(a7) + reduce_lanes(a8) + reduce_lanes(a9) + \
         reduce_lanes(a10) + reduce_lanes(a11);

double fp32_loop_avx2(long iterations) {
  const __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-9f);
#define OP(a) _mm256_fmadd_ps(x, y, a)
  INFERLAB_PEAK_LOOP(__m256, _mm256_setzero_ps(), OP)
#undef OP
}
// What the AVX2 int8 kernels issue per 32 u8 x s8 multiply-adds: vpmaddubsw, vpmaddwd, vpaddd. The
// accumulator is also an operand, so nothing is loop-invariant (12 chains cover the latency).
double int8_loop_avx2(long iterations) {
  const __m256i x = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
#define OP(a) _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, a), ones))
  INFERLAB_PEAK_LOOP(__m256i, _mm256_setzero_si256(), OP)
#undef OP
}
#undef INFERLAB_PEAK_LOOP
}  // namespace
INFERLAB_TARGET_END

namespace {
float sum_plain(const float* a, std::size_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) s0 += a[i], s1 += a[i + 1], s2 += a[i + 2], s3 += a[i + 3];
  for (; i < n; ++i) s0 += a[i];
  return s0 + s1 + s2 + s3;
}
}  // namespace

namespace {
// Each thread reads its slice as `streams` streams (1, 2 or 4), each ReadPrefetch.
// Which is fastest depends on the CPU: on Zen 1 four prefetched streams (one stream left the
// prefetchers short of the DRAM's parallelism); on a Zen 5 a throwaway loop read 42.5 GB/s with two
// streams at 1 thread against 35-37 with four. So the probe tries them all.
struct ReadWay {
  int streams;
  ReadPrefetch prefetch;
};
constexpr ReadWay kReadWays[] = {{1, ReadPrefetch::None}, {2, ReadPrefetch::None}, {4, ReadPrefetch::None},
                                 {1, ReadPrefetch::T0},   {2, ReadPrefetch::T0},   {4, ReadPrefetch::T0},
                                 {1, ReadPrefetch::T0AndT1}, {2, ReadPrefetch::T0AndT1}, {4, ReadPrefetch::T0AndT1}};

template <int S>
float sum_streams(Isa isa, const float* base, std::size_t part, ReadPrefetch prefetch) {
  switch (prefetch) {
    case ReadPrefetch::None: return isa >= Isa::Avx512 ? sum_streams_avx512<S>(base, part) : sum_streams_avx2<S, ReadPrefetch::None>(base, part);
    case ReadPrefetch::T0: return sum_streams_avx2<S, ReadPrefetch::T0>(base, part);
    case ReadPrefetch::T0AndT1: return sum_streams_avx2<S, ReadPrefetch::T0AndT1>(base, part);
  }
  return 0;
}

// One pass over n floats by every thread of the pool; GB/s.
double read_pass(ThreadPool& pool, const float* pa, std::size_t n, ReadWay way) {
  const Isa isa = active_isa();
  std::atomic<double> sink{0};
  const auto start = Clock::now();
  pool.parallel_for(static_cast<int64_t>(n / 64), [&](int64_t begin, int64_t end) {
    const std::size_t len = static_cast<std::size_t>(end - begin) * 64;
    const std::size_t part = len / way.streams / 64 * 64;
    const float* base = pa + begin * 64;
    float s = 0;
    if (isa >= Isa::Avx2 && part > 0) {
      s = way.streams == 1   ? sum_streams<1>(isa, base, part, way.prefetch)
          : way.streams == 2 ? sum_streams<2>(isa, base, part, way.prefetch)
                             : sum_streams<4>(isa, base, part, way.prefetch);
      s += sum_plain(base + way.streams * part, len - way.streams * part);
    } else {
      s = sum_plain(base, len);
    }
    sink.store(sink.load() + s);
  });
  return n * 4.0 / seconds_since(start) / 1e9;
}

// The best of `passes` reads in every way; `fastest` (optional) gets the way that gave it.
double best_read(ThreadPool& pool, const float* pa, std::size_t n, int passes, ReadWay* fastest = nullptr) {
  double best = 0;
  const bool simd = active_isa() >= Isa::Avx2;  // without SIMD every way is the same plain loop
  for (int r = 0; r < passes; ++r)
    for (const ReadWay& way : kReadWays) {
      if (!simd && (way.streams != 1 || way.prefetch != ReadPrefetch::None)) continue;
      const double gbs = read_pass(pool, pa, n, way);
      if (gbs > best) {
        best = gbs;
        if (fastest) *fastest = way;
      }
    }
  return best;
}

// First touch from the threads that will read each slice.
void first_touch(ThreadPool& pool, float* p, std::size_t n, float value) {
  pool.parallel_for(static_cast<int64_t>(n / 64), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * 64; i < end * 64; ++i) p[i] = value;
  });
}
}  // namespace

ReadProbe::ReadProbe(std::size_t bytes) : array_(std::make_unique<AlignedBuffer>(bytes / (64 * sizeof(float)) * 64 * sizeof(float))) {
  first_touch(kernel_pool(), reinterpret_cast<float*>(array_->data()), array_->size() / sizeof(float), 1.0f);
}
ReadProbe::~ReadProbe() = default;
std::size_t ReadProbe::bytes() const { return array_->size(); }

double ReadProbe::measure(int passes) {
  // The best of every way of reading, so that a kernel's "share of the bandwidth" is measured
  // against what the memory can really give.
  constexpr std::size_t kMinBytesPerWay = std::size_t(256) << 20;
  const std::size_t bytes = std::max<std::size_t>(array_->size(), 1);
  passes = std::max<int>(passes, static_cast<int>(std::min<std::size_t>(64, kMinBytesPerWay / bytes)));
  return best_read(kernel_pool(), reinterpret_cast<const float*>(array_->data()), array_->size() / sizeof(float), passes);
}

std::size_t l3_cache_bytes() {
  const long bytes = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  return bytes > 0 ? static_cast<std::size_t>(bytes) : 0;
}

std::size_t large_sweep_bytes() { return std::max(std::size_t(1) << 30, 4 * l3_cache_bytes()); }

std::size_t read_probe_bytes(std::size_t swept) { return std::clamp<std::size_t>(swept, 64 * sizeof(float), large_sweep_bytes()); }

const char* read_prefetch_name(ReadPrefetch p) {
  switch (p) {
    case ReadPrefetch::None: return "none";
    case ReadPrefetch::T0: return "t0";
    case ReadPrefetch::T0AndT1: return "t0+t1";
  }
  return "?";
}

BandwidthResult measure_bandwidth(std::size_t bytes, int repeats) {
  ThreadPool& pool = kernel_pool();
  const std::size_t n = bytes / sizeof(float) / 64 * 64;
  AlignedBuffer a(n * 4), b(n * 4), c(n * 4);
  float* pa = reinterpret_cast<float*>(a.data());
  float* pb = reinterpret_cast<float*>(b.data());
  float* pc = reinterpret_cast<float*>(c.data());
  const Isa isa = active_isa();
  first_touch(pool, pa, n, 1.0f);
  first_touch(pool, pb, n, 2.0f);
  first_touch(pool, pc, n, 0.5f);
  BandwidthResult result;
  result.bytes = n * 4;
  result.threads = pool.size();
  // The read figure is the best of every way of reading, as ReadProbe::measure.
  ReadWay fastest{};
  result.read_gbs = best_read(pool, pa, n, repeats, &fastest);
  result.read_streams = fastest.streams;
  result.read_prefetch = fastest.prefetch;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    pool.parallel_for(static_cast<int64_t>(n / 64), [&](int64_t begin, int64_t end) {
      if (isa >= Isa::Avx512) triad_avx512(pa + begin * 64, pb + begin * 64, pc + begin * 64, 3.0f, (end - begin) * 64);
      else if (isa == Isa::Avx2) triad_avx2(pa + begin * 64, pb + begin * 64, pc + begin * 64, 3.0f, (end - begin) * 64);
      else
        for (int64_t i = begin * 64; i < end * 64; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    });
    result.triad_gbs = std::max(result.triad_gbs, n * 12.0 / seconds_since(start) / 1e9);
  }
  return result;
}

GemmResult measure_sgemm(int m, int n, int k, int threads, double min_seconds) {
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<std::size_t>(m) * k, 0.01f), b(static_cast<std::size_t>(n) * k, 0.02f),
      c(static_cast<std::size_t>(m) * n);
  GemmResult result{0, m, n, k, threads};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  for (int round = 0; round < 3; ++round) {
    int calls = 0;
    const auto start = Clock::now();
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
      ++calls;
    } while (seconds_since(start) < min_seconds / 3);
    result.gflops = std::max(result.gflops, 2.0 * m * n * k * calls / seconds_since(start) / 1e9);
  }
  return result;
}

std::string openblas_core() { return openblas_get_corename(); }
std::string openblas_config() { return openblas_get_config(); }

PeakResult measure_peaks(double seconds) {
  ThreadPool& pool = kernel_pool();
  PeakResult result;
  result.threads = pool.size();
  if (detected_isa() < Isa::Avx2) return result;
  auto measure = [&](double (*loop)(long), double ops_per_iteration) {
    long iterations = 1 << 16;
    for (;;) {  // calibrate on one thread
      const auto start = Clock::now();
      loop(iterations);
      if (seconds_since(start) > seconds / 4) break;
      iterations *= 2;
    }
    std::atomic<double> sink{0};
    const auto start = Clock::now();
    pool.run([&](int, int) { sink.store(sink.load() + loop(iterations)); });
    return ops_per_iteration * iterations * pool.size() / seconds_since(start) / 1e9;
  };
  if (detected_isa() == Isa::Avx2) {
    // Per iteration: kPeakAccumulators x 8 lanes x (1 fp32 | 4 int8) multiply-adds x 2 ops. Without a
    // bf16 dot product, bf16 weights are multiplied by fp32 FMAs: their peak is fp32's.
    result.isa = "avx2";
    result.fp32_gflops = measure(fp32_loop_avx2, kPeakAccumulators * 8.0 * 2);
    result.bf16_gflops = result.fp32_gflops;
    result.int8_gops = measure(int8_loop_avx2, kPeakAccumulators * 8.0 * 4 * 2);
    return result;
  }
  result.isa = "avx512";
  // Per iteration: kPeakAccumulators instructions, each 16 lanes x (2 bf16 pairs | 1 fp32 | 4 int8) x 2 ops.
  result.bf16_gflops = measure(bf16_loop, kPeakAccumulators * 16.0 * 2 * 2);
  result.fp32_gflops = measure(fp32_loop, kPeakAccumulators * 16.0 * 2);
  result.int8_gops = measure(int8_loop, kPeakAccumulators * 16.0 * 4 * 2);
  // Per iteration: 4 tile multiplies of 16 x 16 x 64 multiply-adds x 2 ops.
  if (detected_isa() >= Isa::Amx) result.amx_int8_gops = measure(amx_int8_loop, 4 * 16.0 * 16 * 64 * 2);
  return result;
}

}  // namespace inferlab::fast
