// Formats, packing, quantization, activation preparation and the scalar kernels (the oracle).
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/tensor/fast/packed.h"
#include "inferlab/tensor/fast/thread_pool.h"
#include "tensor/fast/kernels_internal.h"

#include <type_traits>

namespace inferlab::fast {

const char* format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::F32: return "f32";
    case WeightFormat::BF16: return "bf16";
    case WeightFormat::F16: return "f16";
    case WeightFormat::Q8: return "int8";
    case WeightFormat::Q4: return "q4";
    case WeightFormat::Q5: return "q5_0";
    case WeightFormat::Q4_1: return "q4_1";
    case WeightFormat::Q5_1: return "q5_1";
    case WeightFormat::Q4K: return "q4_k";
    case WeightFormat::Q5K: return "q5_k";
    case WeightFormat::Q6K: return "q6_k";
    case WeightFormat::MXFP4: return "mxfp4";
    case WeightFormat::Mixed: return "mixed";
    case WeightFormat::Blocks: return "blocks";
  }
  return "?";
}

WeightFormat parse_format(const std::string& name) {
  if (name == "f32" || name == "fp32" || name == "float32") return WeightFormat::F32;
  if (name == "bf16" || name == "bfloat16") return WeightFormat::BF16;
  if (name == "int8" || name == "q8" || name == "q8_0") return WeightFormat::Q8;
  if (name == "q4" || name == "q4_0" || name == "int4") return WeightFormat::Q4;
  fail("unknown weight format '{}': expected f32, bf16, int8 (q8_0-like) or q4 (q4_0-like)", name);
}

double bytes_per_weight(WeightFormat format) {
  switch (format) {
    case WeightFormat::F32: return 4.0;
    case WeightFormat::BF16: return 2.0;
    case WeightFormat::F16: return 2.0;
    case WeightFormat::Q8: return 34.0 / 32.0;
    case WeightFormat::Q4: return 18.0 / 32.0;
    case WeightFormat::Q5: return 22.0 / 32.0;
    case WeightFormat::Q4_1: return 20.0 / 32.0;
    case WeightFormat::Q5_1: return 24.0 / 32.0;
    case WeightFormat::Q4K: return 148.0 / 256.0;
    case WeightFormat::Q5K: return 180.0 / 256.0;
    case WeightFormat::Q6K: return 210.0 / 256.0;
    case WeightFormat::MXFP4: return 17.0 / 32.0;
    case WeightFormat::Mixed: return 0;
    case WeightFormat::Blocks: return 0;
  }
  return 0;
}

// Buffers of 2 MiB and more (every weight matrix of a real model) get a mapping of their own,
// 2 MiB aligned and marked for transparent huge pages. Decode streams every weight once per token:
// on 4 KiB pages that is a TLB miss every 4 KiB. On a Zen 5 at one thread, decode read 2 points more
// of the memory bandwidth on 2 MiB pages with int8 weights and 7 more with q4 (docs/speed.md). MADV_HUGEPAGE is a request: where THP is off
// ("never"), the same mapping is served with 4 KiB pages, which is still correct.
namespace {
std::size_t mapped_length(std::size_t bytes) { return (bytes + 4095) / 4096 * 4096; }  // whole pages
}  // namespace

AlignedBuffer::AlignedBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  if (bytes >= kHugePageBytes) {
    const std::size_t length = mapped_length(bytes), reserved = length + kHugePageBytes;
    void* base = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) fail("out of memory mapping {} bytes of weights", bytes);
    const auto begin = reinterpret_cast<std::uintptr_t>(base);
    const std::uintptr_t aligned = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    if (aligned > begin) ::munmap(base, aligned - begin);
    if (begin + reserved > aligned + length) ::munmap(reinterpret_cast<void*>(aligned + length), begin + reserved - aligned - length);
    data_ = reinterpret_cast<uint8_t*>(aligned);
    ::madvise(data_, length, MADV_HUGEPAGE);  // anonymous pages start zeroed
    return;
  }
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (!data_) fail("out of memory allocating {} bytes of weights", bytes);
  std::memset(data_, 0, rounded);
}
void AlignedBuffer::release() {
  if (size_ >= kHugePageBytes)
    ::munmap(data_, mapped_length(size_));
  else
    std::free(data_);
  data_ = nullptr;
  size_ = 0;
}
AlignedBuffer::~AlignedBuffer() { release(); }
AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

namespace {
struct F32Source {
  const float* w;
  int in;
  float operator()(int r, int k) const { return w[static_cast<std::size_t>(r) * in + k]; }
};
struct Bf16Source {
  const uint16_t* w;
  int in;
  float operator()(int r, int k) const { return bf16_to_f32(w[static_cast<std::size_t>(r) * in + k]); }
};

using detail::q4_offset;
using detail::q8_offset;
}  // namespace

namespace {

// One fp16 scale per block of 32 codes in [lo, hi]: q4 -8..7, int8 -127..127. The fixed rules
// (q4_0: d = signed largest / -8; q8_0: d = max|x| / 127) map the largest value exactly but can
// leave the rest of the block poorly fitted; another scale often fits better. Tried: the rule's d,
// d * n / (n - t) for t = 0.2, 0.4, ... (n = 8 or 127; up to 1.4 for q4, 0.4 for int8, where more
// candidates did not lower the demo model's KLD further), and the least-squares refit of each
// (sum x*q / sum q*q for the codes it gives); kept: the fp16 scale whose codes give the least
// squared error, never worse than the rule's own (a test checks). docs/quality.md has the KLDs.
// The error is computed 6 (int8) or 16 (q4) times per block of every quantized matrix at load, so
// it is written with the SSE2 baseline of x86-64 (no dispatch needed): codes clamped with maxps /
// minps and rounded to nearest even, as the packer's nearbyint, by adding and taking away
// 1.5 * 2^23 (exact for |v| < 2^22); plain C++ compiled to scalar compares and branches here and
// made loading 3x slower.
struct CodeRange {
  float lo, hi, n;
  int steps;  // candidates t = 0.2 ... 0.2 * steps beside the rule's own d
};
constexpr CodeRange kQ4Codes{-8.0f, 7.0f, 8.0f, 7}, kQ8Codes{-127.0f, 127.0f, 127.0f, 2};

inline __m128 block_codes(__m128 scaled, CodeRange r) {
  const __m128 round = _mm_set1_ps(12582912.0f);
  const __m128 clamped = _mm_min_ps(_mm_max_ps(scaled, _mm_set1_ps(r.lo)), _mm_set1_ps(r.hi));
  return _mm_sub_ps(_mm_add_ps(clamped, round), round);
}

inline float sum_lanes(__m128 v) {
  float lanes[4];
  _mm_storeu_ps(lanes, v);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

float block_error(const float* x, float d, CodeRange r) {
  const __m128 inv = _mm_set1_ps(1.0f / d), scale = _mm_set1_ps(d);
  __m128 error = _mm_setzero_ps();
  for (int k = 0; k < kBlock; k += 4) {
    const __m128 v = _mm_loadu_ps(x + k);
    const __m128 e = _mm_sub_ps(v, _mm_mul_ps(block_codes(_mm_mul_ps(v, inv), r), scale));
    error = _mm_add_ps(error, _mm_mul_ps(e, e));
  }
  return sum_lanes(error);
}

// `rule`: the format's own scale for this block; a zero or non-finite one is kept as it is.
uint16_t block_scale(const float* x, float rule, CodeRange r) {
  uint16_t best = f32_to_f16(rule);
  if (rule == 0 || !std::isfinite(rule)) return best;
  float best_error = block_error(x, f16_to_f32(best), r);
  if (!std::isfinite(best_error)) return best;
  auto consider = [&](float d) {
    const uint16_t d16 = f32_to_f16(d);
    const float rounded = f16_to_f32(d16);
    if (!std::isfinite(rounded) || rounded == 0) return;
    const float error = block_error(x, rounded, r);
    if (error < best_error) best_error = error, best = d16;
  };
  for (int t = 0; t <= r.steps; ++t) {
    const float d = rule * r.n / (r.n - 0.2f * static_cast<float>(t));
    if (t > 0) consider(d);
    // Least-squares refit of the scale for the codes d gives.
    const __m128 inv = _mm_set1_ps(1.0f / d);
    __m128 xq_sum = _mm_setzero_ps(), qq_sum = _mm_setzero_ps();
    for (int k = 0; k < kBlock; k += 4) {
      const __m128 v = _mm_loadu_ps(x + k), q = block_codes(_mm_mul_ps(v, inv), r);
      xq_sum = _mm_add_ps(xq_sum, _mm_mul_ps(v, q));
      qq_sum = _mm_add_ps(qq_sum, _mm_mul_ps(q, q));
    }
    const float xq = sum_lanes(xq_sum), qq = sum_lanes(qq_sum);
    if (qq > 0) consider(xq / qq);
  }
  return best;
}

}  // namespace

template <typename Source>
PackedMatrix PackedMatrix::pack(const Source& source, int out, int in, WeightFormat format) {
  if (out <= 0 || in <= 0) fail("cannot pack a [{}, {}] weight: both dimensions must be positive", out, in);
  PackedMatrix m;
  m.format_ = format;
  m.out_ = out;
  m.in_ = in;
  m.panels_ = (out + kPanel - 1) / kPanel;
  switch (format) {
    case WeightFormat::F32: {
      m.in_padded_ = in;
      m.data_ = AlignedBuffer(static_cast<std::size_t>(out) * in * 4);
      float* dst = reinterpret_cast<float*>(m.data_.data());
      for (int r = 0; r < out; ++r)
        for (int k = 0; k < in; ++k) dst[static_cast<std::size_t>(r) * in + k] = source(r, k);
      return m;
    }
    case WeightFormat::BF16: {
      m.in_padded_ = (in + 1) / 2 * 2;
      m.panel_bytes_ = static_cast<std::size_t>(m.in_padded_) * kPanel * 2;
      m.data_ = AlignedBuffer(m.panel_bytes_ * m.panels_);
      kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          uint16_t* panel = reinterpret_cast<uint16_t*>(m.data_.data() + p * m.panel_bytes_);
          for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
            const int row = static_cast<int>(p) * kPanel + r;
            if constexpr (std::is_same_v<Source, Bf16Source>) {
              // Stored bf16 is copied bit for bit.
              const uint16_t* src = source.w + static_cast<std::size_t>(row) * in;
              for (int k = 0; k < in; ++k) panel[(k / 2) * 32 + r * 2 + k % 2] = src[k];
            } else {
              for (int k = 0; k < in; ++k) panel[(k / 2) * 32 + r * 2 + k % 2] = f32_to_bf16(source(row, k));
            }
          }
        }
      });
      return m;
    }
    case WeightFormat::Q8:
    case WeightFormat::Q4: {
      const bool q8 = format == WeightFormat::Q8;
      m.in_padded_ = (in + kBlock - 1) / kBlock * kBlock;
      const int blocks = m.in_padded_ / kBlock;
      m.allocate_quantized_panels();
      uint16_t* scales = reinterpret_cast<uint16_t*>(m.scales_.data());
      kernel_pool().parallel_for(m.panels_, [&](int64_t begin, int64_t end) {
      float values[kBlock];
      for (int p = static_cast<int>(begin); p < end; ++p) {
        uint8_t* panel = m.data_.data() + p * m.panel_bytes_;
        for (int r = 0; r < kPanel && p * kPanel + r < out; ++r) {
          const int row = p * kPanel + r;
          for (int b = 0; b < blocks; ++b) {
            float largest = 0, amax = 0;
            for (int kk = 0; kk < kBlock; ++kk) {
              const int k = b * kBlock + kk;
              values[kk] = k < in ? source(row, k) : 0.0f;
              if (std::fabs(values[kk]) > amax) amax = std::fabs(values[kk]), largest = values[kk];
            }
            // The scale of least squared error, starting from q8_0's d = max|w| / 127 or q4_0's
            // d = signed largest / -8 (block_scale).
            const uint16_t d16 = q8 ? block_scale(values, amax / 127.0f, kQ8Codes) : block_scale(values, largest / -8.0f, kQ4Codes);
            const float d = f16_to_f32(d16);
            scales[(static_cast<std::size_t>(p) * blocks + b) * kPanel + r] = d16;
            const float inv = d != 0 ? 1.0f / d : 0.0f;
            for (int kk = 0; kk < kBlock; ++kk) {
              if (q8) {
                const int q = std::clamp(static_cast<int>(std::nearbyint(values[kk] * inv)), -127, 127);
                panel[q8_offset(b, r, kk)] = static_cast<uint8_t>(q + 128);
              } else {
                const int q = std::clamp(static_cast<int>(std::nearbyint(values[kk] * inv)) + 8, 0, 15);
                uint8_t& byte = panel[q4_offset(b, r, kk)];
                byte = kk >= 16 ? static_cast<uint8_t>((byte & 0x0f) | (q << 4)) : static_cast<uint8_t>((byte & 0xf0) | q);
              }
            }
          }
        }
      }
      });
      return m;
    }
    case WeightFormat::F16:
    case WeightFormat::Q5:
    case WeightFormat::Q4_1:
    case WeightFormat::Q5_1:
    case WeightFormat::Q4K:
    case WeightFormat::Q5K:
    case WeightFormat::Q6K:
    case WeightFormat::MXFP4:
      fail("weights cannot be packed into {} from floats: it holds a GGUF file's tensors as they are "
           "(quantize with bench/hf_to_gguf.py --type q4_k_m, or choose --weights q4 / int8)",
           format_name(format));
    case WeightFormat::Mixed:
    case WeightFormat::Blocks: break;
  }
  fail("weights cannot be packed into the {} format from floats (it holds a GGUF file's own blocks)", format_name(format));
}

PackedMatrix PackedMatrix::from_f32(const float* w, int out, int in, WeightFormat format) {
  return pack(F32Source{w, in}, out, in, format);
}
PackedMatrix PackedMatrix::from_bf16(const uint16_t* w, int out, int in, WeightFormat format) {
  return pack(Bf16Source{w, in}, out, in, format);
}

void PackedMatrix::allocate_quantized_panels() {
  const bool q8 = format_ == WeightFormat::Q8;
  panel_bytes_ = static_cast<std::size_t>(blocks()) * detail::panel_block_bytes(format_);
  scale_panel_bytes_ = static_cast<std::size_t>(blocks()) * detail::scale_block_bytes(format_);
  data_ = AlignedBuffer(panel_bytes_ * panels_);
  scales_ = AlignedBuffer(scale_panel_bytes_ * panels_);
  // The zero code: q + 128, or 8 in both nibbles (from floats, whose rows may end inside a block).
  // The GGUF formats' rows are whole blocks, and padding rows have zero scales.
  if (format_ == WeightFormat::Q8 || format_ == WeightFormat::Q4) std::memset(data_.data(), q8 ? 128 : 0x88, data_.size());
}

void PackedMatrix::copy_quantized_row(const PackedMatrix& src, int from, int to) {
  const int blocks = this->blocks(), sp = from / kPanel, sr = from % kPanel, dp = to / kPanel, dr = to % kPanel;
  const uint8_t* s = src.panel_data(sp);
  uint8_t* d = data_.data() + dp * panel_bytes_;
  const uint8_t* ss = src.panel_scale_bytes(sp);
  uint8_t* ds = scales_.data() + dp * scale_panel_bytes_;
  if (format_ == WeightFormat::F16) {  // 2 bytes per k
    for (int k = 0; k < in_; ++k) std::memcpy(d + k * 32 + dr * 2, s + k * 32 + sr * 2, 2);
    return;
  }
  const std::size_t block_bytes = detail::panel_block_bytes(format_);
  for (int b = 0; b < blocks; ++b) {
    if (format_ == WeightFormat::Q8)
      for (int kk = 0; kk < kBlock; ++kk) d[q8_offset(b, dr, kk)] = s[q8_offset(b, sr, kk)];
    else  // one byte holds the row's weights j and j + 16 (q5_k / q6_k: their high bits follow)
      for (int j = 0; j < kBlock / 2; ++j) d[b * block_bytes + q4_offset(0, dr, j)] = s[b * block_bytes + q4_offset(0, sr, j)];
    if (format_ == WeightFormat::Q6K)  // the high bits: 2 bytes per k-quad pair, 4 per row and half
      for (int h = 0; h < 2; ++h)
        std::memcpy(d + b * block_bytes + 256 + h * 64 + dr * 4, s + b * block_bytes + 256 + h * 64 + sr * 4, 4);
    if (detail::five_bit_codes(format_))  // the fifth bits: 4 bytes per row
      std::memcpy(d + b * block_bytes + 256 + dr * 4, s + b * block_bytes + 256 + sr * 4, 4);
    if (detail::block_mins(format_)) {  // d[16] then m[16] per block
      for (int h = 0; h < 2; ++h) std::memcpy(ds + b * 64 + h * 32 + dr * 2, ss + b * 64 + h * 32 + sr * 2, 2);
      continue;
    }
    if (format_ == WeightFormat::MXFP4) {  // a scale byte per row
      ds[b * kPanel + dr] = ss[b * kPanel + sr];
      continue;
    }
    if (!k_panels(format_)) {
      std::memcpy(ds + (b * kPanel + dr) * 2, ss + (b * kPanel + sr) * 2, 2);
      continue;
    }
    const std::size_t at = detail::kscale_offset(format_, b);  // a byte per row, twice
    ds[at + dr] = ss[at + sr];
    ds[at + kPanel + dr] = ss[at + kPanel + sr];
    if (b % 8 == 0) {  // the super-block's fp16 header: d (and dmin) per row
      const std::size_t head = detail::kheader_offset(format_, b);
      for (int h = 0; h < (format_ == WeightFormat::Q6K ? 1 : 2); ++h)
        std::memcpy(ds + head + h * 32 + dr * 2, ss + head + h * 32 + sr * 2, 2);
    }
  }
}

// Quantized parts that do not fill whole panels: each row's codes and scales move to their new
// panel position as they are (requantizing dequantized rows could pick other scales: block_scale).
PackedMatrix PackedMatrix::concat_quantized_rows(const std::vector<const PackedMatrix*>& parts, int out) {
  const PackedMatrix& first = *parts.front();
  PackedMatrix m;
  m.format_ = first.format_;
  m.out_ = out;
  m.in_ = first.in_;
  m.in_padded_ = first.in_padded_;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.allocate_quantized_panels();
  int row = 0;
  for (const PackedMatrix* p : parts)
    for (int i = 0; i < p->out_; ++i, ++row) m.copy_quantized_row(*p, i, row);
  return m;
}

std::size_t PackedMatrix::bytes() const {
  std::size_t total = data_.size() + scales_.size();
  for (const PackedMatrix& part : parts_) total += part.bytes();
  return total;
}

PackedMatrix PackedMatrix::concat_rows(const std::vector<const PackedMatrix*>& parts) {
  if (parts.empty()) fail("concat_rows: no matrices given");
  const PackedMatrix& first = *parts.front();
  int out = 0;
  bool whole_panels = true, same_format = true, int8_parts = true;
  for (const PackedMatrix* p : parts) {
    same_format &= p->format_ == first.format_ && first.format_ != WeightFormat::Blocks && first.format_ != WeightFormat::Mixed;
    int8_parts &= int8_activations(p->format_) && p->in_padded_ == first.in_padded_ && p->in_ == first.in_;
  }
  // Parts of different formats that all take int8 activations (a GGUF K-quant mix: Q4_K q/k beside
  // a Q6_K v) keep their panels, as parts of a mixed matrix; other mixes (floats, or blocks) are
  // fused as rows of ggml blocks, which every format converts to exactly.
  if (!same_format && int8_parts) return concat_mixed(parts);
  if (!same_format) return concat_blocks(parts);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const PackedMatrix& p = *parts[i];
    if (p.format_ != first.format_ || p.in_ != first.in_)
      fail("concat_rows: part {} is [{}, {}] {} but part 0 is [{}, {}] {}", i, p.out_, p.in_, format_name(p.format_),
           first.out_, first.in_, format_name(first.format_));
    if (i + 1 < parts.size() && p.out_ % kPanel != 0) whole_panels = false;
    out += p.out_;
  }
  if (!whole_panels && (int8_activations(first.format_) || first.format_ == WeightFormat::F16)) return concat_quantized_rows(parts, out);
  if (!whole_panels || first.format_ == WeightFormat::F32) {
    // Rows through fp32: exact for f32 and bf16.
    std::vector<float> rows(static_cast<std::size_t>(out) * first.in_);
    int r = 0;
    for (const PackedMatrix* p : parts)
      for (int i = 0; i < p->out_; ++i, ++r) p->dequantize_row(i, rows.data() + static_cast<std::size_t>(r) * first.in_);
    return from_f32(rows.data(), out, first.in_, first.format_);
  }
  PackedMatrix m;
  m.format_ = first.format_;
  m.out_ = out;
  m.in_ = first.in_;
  m.in_padded_ = first.in_padded_;
  m.panel_bytes_ = first.panel_bytes_;
  m.scale_panel_bytes_ = first.scale_panel_bytes_;
  m.panels_ = (out + kPanel - 1) / kPanel;
  m.data_ = AlignedBuffer(m.panel_bytes_ * m.panels_);
  const std::size_t scale_panel = first.scale_panel_bytes_;
  if (scale_panel) m.scales_ = AlignedBuffer(scale_panel * m.panels_);
  std::size_t data_at = 0, scales_at = 0;
  for (const PackedMatrix* p : parts) {
    std::memcpy(m.data_.data() + data_at, p->data_.data(), p->panel_bytes_ * p->panels_);
    data_at += p->panel_bytes_ * p->panels_;
    if (p->scales_.size()) {
      std::memcpy(m.scales_.data() + scales_at, p->scales_.data(), scale_panel * p->panels_);
      scales_at += scale_panel * p->panels_;
    }
  }
  return m;
}

PackedMatrix PackedMatrix::concat_mixed(const std::vector<const PackedMatrix*>& parts) {
  PackedMatrix m;
  m.format_ = WeightFormat::Mixed;
  m.in_ = parts.front()->in_;
  m.in_padded_ = parts.front()->in_padded_;
  for (const PackedMatrix* p : parts) {
    // A mixed part brings its own parts; runs of one format are fused as panels.
    const std::vector<const PackedMatrix*> pieces = [&] {
      std::vector<const PackedMatrix*> v;
      if (p->format_ != WeightFormat::Mixed) v.push_back(p);
      for (const PackedMatrix& q : p->parts_) v.push_back(&q);
      return v;
    }();
    for (const PackedMatrix* piece : pieces) {
      if (!m.parts_.empty() && m.parts_.back().format_ == piece->format_) {
        m.parts_.back() = concat_rows({&m.parts_.back(), piece});
      } else {
        m.part_rows_.push_back(m.out_);
        m.parts_.push_back(concat_rows({piece}));  // a copy
      }
      m.out_ += piece->out_;
    }
  }
  for (const PackedMatrix& part : m.parts_) m.panels_ += part.panels_;
  return m;
}

void PackedMatrix::dequantize_row(int row, float* dst) const {
  if (row < 0 || row >= out_) fail("row {} outside a matrix of {} rows", row, out_);
  if (format_ == WeightFormat::Mixed) {
    std::size_t i = parts_.size() - 1;
    while (part_rows_[i] > row) --i;
    return parts_[i].dequantize_row(row - part_rows_[i], dst);
  }
  const int p = row / kPanel, r = row % kPanel;
  switch (format_) {
    case WeightFormat::F32: std::memcpy(dst, f32_data() + static_cast<std::size_t>(row) * in_, sizeof(float) * in_); return;
    case WeightFormat::BF16: {
      const uint16_t* panel = reinterpret_cast<const uint16_t*>(panel_data(p));
      for (int k = 0; k < in_; ++k) dst[k] = bf16_to_f32(panel[(k / 2) * 32 + r * 2 + k % 2]);
      return;
    }
    case WeightFormat::F16: {
      const uint16_t* panel = reinterpret_cast<const uint16_t*>(panel_data(p));
      for (int k = 0; k < in_; ++k) dst[k] = f16_to_f32(panel[k * kPanel + r]);
      return;
    }
    case WeightFormat::Blocks: {
      uint32_t type;
      const uint8_t* src = block_row(row, type);
      dequantize_ggml_row(type, src, in_, dst);
      return;
    }
    case WeightFormat::Q4K:
    case WeightFormat::Q5K:
    case WeightFormat::Q6K: return dequantize_k_panel_row(row, dst);
    case WeightFormat::MXFP4: return dequantize_mxfp4_panel_row(row, dst);
    case WeightFormat::Mixed: return;  // above
    case WeightFormat::Q8:
    case WeightFormat::Q4:
    case WeightFormat::Q5: {
      const uint8_t* panel = panel_data(p);
      const uint16_t* scales = panel_scales(p);
      for (int k = 0; k < in_; ++k) {
        const int b = k / kBlock, kk = k % kBlock;
        dst[k] = static_cast<float>(detail::panel_int_code(format_, panel, b, r, kk)) * f16_to_f32(scales[b * kPanel + r]);
      }
      return;
    }
    case WeightFormat::Q4_1:
    case WeightFormat::Q5_1: {  // as ggml's dequantization: q * d + m
      const uint8_t* panel = panel_data(p);
      const uint16_t* scales = panel_scales(p);  // per block d[16], m[16]
      for (int k = 0; k < in_; ++k) {
        const int b = k / kBlock, kk = k % kBlock;
        dst[k] = static_cast<float>(detail::panel_int_code(format_, panel, b, r, kk)) * f16_to_f32(scales[b * 32 + r]) +
                 f16_to_f32(scales[b * 32 + 16 + r]);
      }
      return;
    }
  }
}

namespace detail {
void size_prepared(int rows, const PackedMatrix& w, PreparedInput& prepared) {
  prepared.rows = rows;
  prepared.in_padded = w.in_padded();
  const std::size_t n = static_cast<std::size_t>(rows) * w.in_padded();
  if (w.format() == WeightFormat::BF16) {
    prepared.bf16.resize(n);
    prepared.bf16_f32.resize(active_kernels().bf16_as_f32 ? n : 0);
  } else if (int8_activations(w.format()) || has_int_dot_rows(w)) {
    prepared.blocks = w.blocks();
    prepared.q8.resize(n);
    prepared.scale.resize(static_cast<std::size_t>(rows) * w.blocks());
    prepared.sum.resize(static_cast<std::size_t>(rows) * w.blocks());
    bool q6k = w.format() == WeightFormat::Q6K;
    for (const PackedMatrix& part : w.parts()) q6k |= part.format() == WeightFormat::Q6K;
    prepared.sum_low.resize(q6k ? static_cast<std::size_t>(rows) * w.blocks() : 0);
    const bool by_block = int8_activations(w.format()) && reads_by_block(active_kernels(), rows);
    prepared.q8_by_block.resize(by_block ? n : 0);
    prepared.scale_by_block.resize(by_block ? prepared.scale.size() : 0);
    prepared.sum_by_block.resize(by_block ? prepared.sum.size() : 0);
    prepared.sum_low_by_block.resize(by_block ? prepared.sum_low.size() : 0);
  } else {
    fail("prepare_input: {} weights take the activations as they are", format_name(w.format()));
  }
}

namespace {
// One row to int8 per block of 32: dst codes, scale[b] = max|x| / 127, sums[b] = the sum of its codes.
void quantize_row(const KernelTable& simd, const float* src, int in, int blocks, int8_t* dst, float* scale, int32_t* sums) {
  if (simd.q8_row) return simd.q8_row(src, in, blocks, dst, scale, sums);
  for (int b = 0; b < blocks; ++b) {
    float amax = 0;
    const int k0 = b * kBlock, k1 = std::min(in, k0 + kBlock);
    for (int k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(src[k]));
    const float d = amax / 127.0f;
    const float inv = d != 0 ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int k = k0; k < k0 + kBlock; ++k) {
      // Clamped as a float, and NaN as the SIMD conversion gives it (integer indefinite, clamped
      // to -127): casting NaN or an out-of-range float to int is undefined behaviour.
      const float v = k < in ? std::nearbyint(src[k] * inv) : 0.0f;
      const int q = std::isnan(v) ? -127 : static_cast<int>(std::clamp(v, -127.0f, 127.0f));
      dst[k] = static_cast<int8_t>(q);
      sum += q;
    }
    scale[b] = d;
    sums[b] = sum;
  }
}
}  // namespace

void prepare_rows(const float* x, int row_begin, int row_end, int in, const PackedMatrix& w, PreparedInput& prepared,
                  bool use_simd) {
  static const KernelTable none{};
  const KernelTable& simd = use_simd ? active_kernels() : none;
  if (w.format() == WeightFormat::BF16) {
    for (int r = row_begin; r < row_end; ++r) {
      uint16_t* dst = prepared.bf16.data() + static_cast<std::size_t>(r) * w.in_padded();
      const float* src = x + static_cast<std::size_t>(r) * in;
      if (simd.bf16_row) {
        simd.bf16_row(src, in, w.in_padded(), dst);
      } else {
        for (int k = 0; k < in; ++k) dst[k] = f32_to_bf16(src[k]);
        for (int k = in; k < w.in_padded(); ++k) dst[k] = 0;
      }
      if (!prepared.bf16_f32.empty()) {  // sized by size_prepared when the active kernels read it
        float* wide = prepared.bf16_f32.data() + static_cast<std::size_t>(r) * w.in_padded();
        for (int k = 0; k < w.in_padded(); ++k) wide[k] = bf16_to_f32(dst[k]);
      }
    }
    return;
  }
  const int blocks = w.blocks();
  for (int r = row_begin; r < row_end; ++r) {
    const float* src = x + static_cast<std::size_t>(r) * in;
    int8_t* dst = prepared.q8.data() + static_cast<std::size_t>(r) * w.in_padded();
    quantize_row(simd, src, in, blocks, dst, prepared.scale.data() + static_cast<std::size_t>(r) * blocks,
                 prepared.sum.data() + static_cast<std::size_t>(r) * blocks);
    if (!prepared.sum_low.empty()) {
      // q6_k's blocks have two scales (16 k each): the sum of the first half's codes too.
      int32_t* low = prepared.sum_low.data() + static_cast<std::size_t>(r) * blocks;
      for (int b = 0; b < blocks; ++b) {
        low[b] = 0;
        for (int k = 0; k < kBlock / 2; ++k) low[b] += dst[b * kBlock + k];
      }
    }
    if (prepared.q8_by_block.empty()) continue;
    for (int b = 0; b < blocks; ++b) {  // row r of each block's rows side by side
      const std::size_t from = static_cast<std::size_t>(r) * blocks + b, to = static_cast<std::size_t>(b) * prepared.rows + r;
      std::memcpy(prepared.q8_by_block.data() + to * kBlock, dst + b * kBlock, kBlock);
      prepared.scale_by_block[to] = prepared.scale[from];
      prepared.sum_by_block[to] = prepared.sum[from];
      if (!prepared.sum_low.empty()) prepared.sum_low_by_block[to] = prepared.sum_low[from];
    }
  }
}

}  // namespace detail

void prepare_input(const float* x, int rows, int in, const PackedMatrix& w, PreparedInput& prepared) {
  if (in != w.in()) fail("matmul input has {} columns but the weight expects {}", in, w.in());
  detail::size_prepared(rows, w, prepared);
  detail::prepare_rows(x, 0, rows, in, w, prepared);
}

namespace detail {
namespace {
void bf16_scalar(const KernelArgs& a, int panel_begin, int panel_end) {
  const PackedMatrix& w = *a.w;
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint16_t* panel = reinterpret_cast<const uint16_t*>(w.panel_data(p));
    for (int r = 0; r < kPanel && p * kPanel + r < w.out(); ++r)
      for (int row = 0; row < a.rows; ++row) {
        const uint16_t* x = a.in->bf16.data() + static_cast<std::size_t>(row) * w.in_padded();
        float acc = 0;
        for (int kp = 0; kp < w.in_padded() / 2; ++kp) {
          // vdpbf16ps order: the odd element first, then the even one, each rounded once.
          acc = std::fma(bf16_to_f32(panel[kp * 32 + r * 2 + 1]), bf16_to_f32(x[2 * kp + 1]), acc);
          acc = std::fma(bf16_to_f32(panel[kp * 32 + r * 2]), bf16_to_f32(x[2 * kp]), acc);
        }
        store_output(a, row, p * kPanel + r, acc);
      }
  }
}

// int8, q4, q5_0, q4_1, q5_1 and mxfp4 (its codes looked up by panel_int_code, its E8M0 scale bytes
// as 2^(e - 128)): the oracle of the SIMD kernels.
template <WeightFormat F>
void quant_scalar(const KernelArgs& a, int panel_begin, int panel_end) {
  const PackedMatrix& w = *a.w;
  const int blocks = w.blocks();
  for (int p = panel_begin; p < panel_end; ++p) {
    const uint8_t* panel = w.panel_data(p);
    const uint16_t* scales = w.panel_scales(p);
    const uint8_t* scale_bytes = w.panel_scale_bytes(p);
    for (int r = 0; r < kPanel && p * kPanel + r < w.out(); ++r)
      for (int row = 0; row < a.rows; ++row) {
        const int8_t* x = a.in->q8.data() + static_cast<std::size_t>(row) * w.in_padded();
        float acc = 0;
        for (int b = 0; b < blocks; ++b) {
          int32_t isum = 0;
          for (int kk = 0; kk < kBlock; ++kk) isum += panel_int_code(F, panel, b, r, kk) * x[b * kBlock + kk];
          const std::size_t at = static_cast<std::size_t>(row) * blocks + b;
          if constexpr (block_mins(F)) {  // d * q + m: the m term times the block's activation sum
            const float xs = a.in->scale[at];
            acc = std::fma(static_cast<float>(isum), f16_to_f32(scales[b * 32 + r]) * xs, acc);
            acc = std::fma(f16_to_f32(scales[b * 32 + 16 + r]), xs * static_cast<float>(a.in->sum[at]), acc);
            continue;
          }
          float weight_scale;
          if constexpr (F == WeightFormat::MXFP4)
            weight_scale = e8m0_half(scale_bytes[b * kPanel + r]);
          else
            weight_scale = f16_to_f32(scales[b * kPanel + r]);
          acc = std::fma(static_cast<float>(isum), weight_scale * a.in->scale[at], acc);
        }
        store_output(a, row, p * kPanel + r, acc);
      }
  }
}
}  // namespace

const KernelTable& scalar_kernels() {
  static const KernelTable table{bf16_scalar,
                                 f16_scalar,
                                 quant_scalar<WeightFormat::Q8>,
                                 quant_scalar<WeightFormat::Q4>,
                                 quant_scalar<WeightFormat::Q5>,
                                 quant_scalar<WeightFormat::Q4_1>,
                                 quant_scalar<WeightFormat::Q5_1>,
                                 q4k_scalar,
                                 q5k_scalar,
                                 q6k_scalar,
                                 quant_scalar<WeightFormat::MXFP4>};
  return table;
}
}  // namespace detail

void matmul_scalar(const float* x, int rows, const PackedMatrix& w, const float* bias, float* y) {
  if (rows <= 0) return;
  if (w.format() == WeightFormat::F32) {
    for (int row = 0; row < rows; ++row)
      for (int o = 0; o < w.out(); ++o) {
        float acc = 0;
        const float* wr = w.f32_data() + static_cast<std::size_t>(o) * w.in();
        for (int k = 0; k < w.in(); ++k) acc = std::fma(wr[k], x[static_cast<std::size_t>(row) * w.in() + k], acc);
        y[static_cast<std::size_t>(row) * w.out() + o] = acc + (bias ? bias[o] : 0.0f);
      }
    return;
  }
  if (w.format() == WeightFormat::F16) {  // the activations as given
    const detail::KernelArgs args{nullptr, &w, bias, y, rows, x};
    return detail::f16_scalar(args, 0, w.panels());
  }
  if (w.format() == WeightFormat::Blocks) {
    PreparedInput prepared;
    const bool int_rows = detail::has_int_dot_rows(w);
    if (int_rows) prepare_input(x, rows, w.in(), w, prepared);
    const detail::KernelArgs args{int_rows ? &prepared : nullptr, &w, bias, y, rows, x};
    return detail::blocks_kernel(args, 0, w.panels(), nullptr);
  }
  PreparedInput prepared;
  prepare_input(x, rows, w.in(), w, prepared);
  if (w.format() == WeightFormat::Mixed) {
    for (std::size_t i = 0; i < w.parts().size(); ++i) {
      const PackedMatrix& part = w.parts()[i];
      const int first = w.part_rows()[i];
      const detail::KernelArgs args{&prepared, &part, bias ? bias + first : nullptr, y + first, rows, nullptr,
                                    static_cast<std::size_t>(w.out())};
      detail::panel_kernel(detail::scalar_kernels(), part.format())(args, 0, part.panels());
    }
    return;
  }
  const detail::KernelArgs args{&prepared, &w, bias, y, rows};
  detail::panel_kernel(detail::scalar_kernels(), w.format())(args, 0, w.panels());
}

}  // namespace inferlab::fast
