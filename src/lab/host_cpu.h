// This machine's CPU utilisation (from /proc/stat's tick counters) and clock frequency (cpufreq's
// scaling_cur_freq in sysfs, else /proc/cpuinfo's "cpu MHz"), for the series recorded during a run.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace inferlab::lab {

struct CpuTicks {
  uint64_t busy = 0, total = 0;  // total = user+nice+system+idle+iowait+irq+softirq+steal; busy = total - idle - iowait
};
// "cpu" (all CPUs) and "cpu0", "cpu1", ... from /proc/stat's text; lines it cannot read are skipped.
std::map<std::string, CpuTicks> parse_proc_stat(const std::string& text);
std::map<std::string, CpuTicks> read_proc_stat();  // empty when /proc/stat is not readable
// The share of ticks between two readings that were busy (0..1); -1 when no tick passed.
double cpu_utilization(const CpuTicks& before, const CpuTicks& after);

struct CpuFrequencies {
  std::string source;                   // where they came from; "" when not readable
  std::vector<std::pair<int, double>> mhz;  // (cpu number, MHz)
};
// /proc/cpuinfo's "processor : N" ... "cpu MHz : F" pairs.
std::vector<std::pair<int, double>> parse_cpuinfo_mhz(const std::string& text);
CpuFrequencies read_cpu_frequencies();

}  // namespace inferlab::lab
