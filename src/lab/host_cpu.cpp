// CPU utilisation and frequency of this machine (see host_cpu.h).
#include "lab/host_cpu.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace inferlab::lab {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::map<std::string, CpuTicks> parse_proc_stat(const std::string& text) {
  std::map<std::string, CpuTicks> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("cpu")) continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    // user nice system idle iowait irq softirq steal (guest time is already inside user and nice).
    uint64_t v[8] = {};
    int n = 0;
    while (n < 8 && fields >> v[n]) ++n;
    if (n < 4) continue;
    CpuTicks t;
    for (int i = 0; i < n; ++i) t.total += v[i];
    t.busy = t.total - v[3] - (n > 4 ? v[4] : 0);
    out[name] = t;
  }
  return out;
}

std::map<std::string, CpuTicks> read_proc_stat() { return parse_proc_stat(read_file("/proc/stat")); }

double cpu_utilization(const CpuTicks& before, const CpuTicks& after) {
  if (after.total <= before.total) return -1;
  const double busy = after.busy >= before.busy ? static_cast<double>(after.busy - before.busy) : 0;
  return busy / static_cast<double>(after.total - before.total);
}

std::vector<std::pair<int, double>> parse_cpuinfo_mhz(const std::string& text) {
  std::vector<std::pair<int, double>> out;
  std::istringstream lines(text);
  std::string line;
  int cpu = -1;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    try {
      if (key == "processor") cpu = std::stoi(line.substr(colon + 1));
      else if (key == "cpu MHz" && cpu >= 0) out.emplace_back(cpu, std::stod(line.substr(colon + 1)));
    } catch (const std::exception&) {  // a field that is not a number: not a frequency we can use
    }
  }
  return out;
}

CpuFrequencies read_cpu_frequencies() {
  CpuFrequencies f;
  // cpufreq's current frequency (kHz), per CPU, where the kernel has a cpufreq driver.
  std::error_code ec;
  for (int cpu = 0;; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    if (!std::filesystem::exists(dir, ec)) break;
    const std::string khz = read_file(dir + "/cpufreq/scaling_cur_freq");
    try {
      if (!khz.empty()) f.mhz.emplace_back(cpu, std::stod(khz) / 1000);
    } catch (const std::exception&) {
    }
  }
  if (!f.mhz.empty()) {
    f.source = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq";
    return f;
  }
  f.mhz = parse_cpuinfo_mhz(read_file("/proc/cpuinfo"));
  if (!f.mhz.empty()) f.source = "/proc/cpuinfo";
  return f;
}

}  // namespace inferlab::lab
