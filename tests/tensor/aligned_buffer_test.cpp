// AlignedBuffer: weight matrices of 2 MiB and more get a 2 MiB aligned mapping that the kernel may
// back with transparent huge pages; smaller buffers come from the heap. Both start zeroed.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "inferlab/tensor/fast/packed.h"

using inferlab::fast::AlignedBuffer;
using inferlab::fast::kHugePageBytes;

namespace {

bool all_zero(const AlignedBuffer& b) {
  for (std::size_t i = 0; i < b.size(); ++i)
    if (b.data()[i] != 0) return false;
  return true;
}

// THPeligible of the mapping that holds `p` in /proc/self/smaps (nullopt: no such line).
std::optional<int> thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return std::nullopt;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

}  // namespace

TEST(AlignedBuffer, SmallBuffersAreZeroedAndCacheLineAligned) {
  AlignedBuffer b(1000);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
  EXPECT_TRUE(all_zero(b));
  EXPECT_EQ(AlignedBuffer(0).data(), nullptr);
}

TEST(AlignedBuffer, LargeBuffersAreHugePageAlignedZeroedAndWritable) {
  const std::size_t bytes = 5 * kHugePageBytes + 100;  // not a whole number of pages
  AlignedBuffer b(bytes);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kHugePageBytes, 0u);
  EXPECT_TRUE(all_zero(b));
  b.data()[0] = 1;
  b.data()[bytes - 1] = 2;

  uint8_t* const data = b.data();
  AlignedBuffer moved(std::move(b));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(moved.size(), bytes);
  EXPECT_EQ(b.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.size(), 0u);
  AlignedBuffer assigned(100);
  assigned = std::move(moved);  // frees the small buffer, takes the mapping
  EXPECT_EQ(assigned.data(), data);
  EXPECT_EQ(assigned.data()[bytes - 1], 2);
}

TEST(AlignedBuffer, LargeBuffersAskForTransparentHugePages) {
  const std::string mode = thp_mode();
  if (mode.empty() || mode == "never") GTEST_SKIP() << "transparent huge pages are off here (" << mode << ")";
  AlignedBuffer b(3 * kHugePageBytes);
  const std::optional<int> eligible = thp_eligible(b.data());
  if (!eligible) GTEST_SKIP() << "this kernel's smaps has no THPeligible line";
  // In "madvise" mode only the MADV_HUGEPAGE request makes the mapping eligible.
  EXPECT_EQ(*eligible, 1) << "THP mode " << mode;
}
