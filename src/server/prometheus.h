// GET /metrics: the server's counters and the engine's statistics in Prometheus' text format,
// including the gauges the Gateway API Inference Extension's model-server protocol reads (queue,
// running, KV-cache use 0-1, a cache-config info metric), optionally also under vLLM's names.
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
  bool vllm_names = false;  // --metrics-compat vllm: the router-facing gauges under vLLM's names too
};

std::string prometheus_text(const MetricsSnapshot& snapshot);

}  // namespace inferlab::api
