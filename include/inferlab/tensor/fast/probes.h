// The machine's limits, measured: memory read bandwidth (STREAM-like), OpenBLAS sgemm throughput
// on given shapes, and the peak of the bf16 dot-product instruction. Benchmarks divide by these.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace inferlab::fast {

class AlignedBuffer;  // packed.h

// How the read probe asks for lines ahead of its loads: not at all (the hardware prefetchers
// alone), prefetcht0 (into the L1), or prefetcht0 plus prefetcht1 further ahead (into the L2), as
// the one-row decode tiles do on Intel (kernels_internal.h).
enum class ReadPrefetch { None, T0, T0AndT1 };
const char* read_prefetch_name(ReadPrefetch p);  // "none", "t0", "t0+t1"

struct BandwidthResult {
  double read_gbs = 0;   // sum over a large array (what decode does to weights), the fastest way:
  int read_streams = 0;  // streams per thread (1, 2 or 4)
  ReadPrefetch read_prefetch = ReadPrefetch::None;
  double triad_gbs = 0;  // a[i] = b[i] + s*c[i], STREAM's counting (3 arrays x n x 4 bytes)
  std::size_t bytes = 0; // size of the read array
  int threads = 0;
};
// Arrays of `bytes` each; best of `repeats`. Uses the kernel pool.
BandwidthResult measure_bandwidth(std::size_t bytes, int repeats = 5);

// The read half of measure_bandwidth on an array allocated (and paged in) once, so that it can be
// measured again right beside each run of a benchmark: on a shared host the bandwidth drifts by up
// to 2x within minutes, and a share of it means something only against the probe of the same moment.
// Size it as what it is compared with reads (read_probe_bytes): a large L3 serves part of any
// sweep not far above its size, to the probe and to decode alike (docs/speed.md, "The probe's size").
class ReadProbe {
 public:
  explicit ReadProbe(std::size_t bytes);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // GB/s over all threads of the kernel pool: the best of `passes` reads each way (1, 2 or 4
  // streams per thread, each ReadPrefetch); more passes on a small array, so that each way reads
  // at least 256 MiB in all.
  double measure(int passes = 2);
  std::size_t bytes() const;

 private:
  std::unique_ptr<AlignedBuffer> array_;  // a whole number of 64-float lines
};

// The last-level cache's size in bytes as the C library reports it (0: unknown).
std::size_t l3_cache_bytes();
// A sweep the L3 serves none of: 4x its size, and at least 1 GiB (on a 300 MiB L3 the read
// speed stopped depending on the size from about 3x on).
std::size_t large_sweep_bytes();
// The probe for a sweep over `swept` bytes: the same size, up to large_sweep_bytes().
std::size_t read_probe_bytes(std::size_t swept);

struct GemmResult {
  double gflops = 0;
  int m = 0, n = 0, k = 0, threads = 0;
};
// C[m][n] = A[m][k] * B[n][k]^T with OpenBLAS on `threads` threads (as the engine's f32 path calls it).
GemmResult measure_sgemm(int m, int n, int k, int threads, double min_seconds = 0.3);
std::string openblas_core();    // openblas_get_corename(): what the library really runs
std::string openblas_config();  // openblas_get_config()

// Register-only peaks, all threads of the pool, of what the kernels issue: with AVX-512,
// vdpbf16ps (bf16), fp32 FMA and vpdpbusd (int8); with AVX2, fp32 FMA (which bf16 weights also
// run on) and vpmaddubsw + vpmaddwd (int8). All 0 without AVX2.
struct PeakResult {
  std::string isa;          // "avx512", "avx2" or empty
  double bf16_gflops = 0;   // 2 flops per bf16 multiply-add
  double fp32_gflops = 0;
  double int8_gops = 0;
  double amx_int8_gops = 0;  // tdpbssd on whole tiles; 0 without AMX
  int threads = 0;
};
PeakResult measure_peaks(double seconds = 0.3);

}  // namespace inferlab::fast
