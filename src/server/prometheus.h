// GET /metrics: the server's counters and the engine's statistics in Prometheus' text format.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "inferlab/generation/scheduler.h"

namespace inferlab::api {

// One reading of everything /metrics reports.
struct MetricsSnapshot {
  int admitted_connections = 0;
  uint64_t refused_connections = 0;
  uint64_t memory_trims = 0;
  bool model_ready = false;
  std::map<std::pair<std::string, int>, uint64_t> http_requests;  // (path, status) -> count
  std::optional<SchedulerStats> engine;                           // none until the model is loaded
  int active_streams = 0;
};

std::string prometheus_text(const MetricsSnapshot& snapshot);

}  // namespace inferlab::api
