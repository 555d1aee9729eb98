// The probes' report: an OpenBLAS that fell back to its oldest x86-64 kernels on a SIMD CPU says
// how to pick its own (OPENBLAS_CORETYPE), and only then.
#include "inferlab/bench/probes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace inferlab::bench {
namespace {

// cpu: the kernels' features line, whose first word is the active instruction set; the peaks are
// measured on the CPU's own (empty without AVX2).
MachineProbes probes_of(const std::string& cpu, const std::string& core) {
  MachineProbes p;
  p.threads = 1;
  p.cpu = cpu;
  const std::string active = cpu.substr(0, cpu.find(' '));
  p.peaks.isa = active == "amx" ? "avx512" : active == "scalar" ? "" : active;
  p.openblas_core = core;
  p.openblas_config = "OpenBLAS 0.3.21 DYNAMIC_ARCH " + core;
  return p;
}

TEST(ProbesText, NamesTheOpenBlasCoreTypeWhenItFellBackOnASimdCpu) {
  const std::string avx512 = probes_text(probes_of("avx512 (avx512f avx2 fma f16c)", "Prescott"));
  EXPECT_NE(avx512.find("set OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << avx512;
  const std::string amx = probes_text(probes_of("amx (avx512f amx-int8 avx2 fma f16c)", "Prescott"));
  EXPECT_NE(amx.find("set OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << amx;
  const std::string avx2 = probes_text(probes_of("avx2 (avx2 fma f16c)", "Prescott"));
  EXPECT_NE(avx2.find("set OPENBLAS_CORETYPE=Haswell"), std::string::npos) << avx2;
  for (const auto& [cpu, core] : {std::pair{"avx512 (avx512f avx2 fma f16c)", "SkylakeX"}, std::pair{"avx2 (avx2 fma f16c)", "Zen"},
                                  std::pair{"scalar ()", "Prescott"}})
    EXPECT_EQ(probes_text(probes_of(cpu, core)).find("OPENBLAS_CORETYPE"), std::string::npos) << cpu << " " << core;
}

// The AMX int8 peak is a line of its own, only where it was measured.
TEST(ProbesText, ReportsTheAmxPeakOnlyWhereMeasured) {
  MachineProbes p = probes_of("amx (avx512f amx-int8 avx2 fma f16c)", "SkylakeX");
  EXPECT_EQ(probes_text(p).find("peak (AMX)"), std::string::npos);
  EXPECT_EQ(probes_json(p)["peaks"]["amx_int8_gops"], 0.0);
  p.peaks.amx_int8_gops = 5900;
  EXPECT_NE(probes_text(p).find("peak (AMX): int8 tdpbssd 5900 GOP/s"), std::string::npos) << probes_text(p);
  EXPECT_EQ(probes_json(p)["peaks"]["amx_int8_gops"], 5900.0);
}

}  // namespace
}  // namespace inferlab::bench
