// GET /dashboard and GET /dashboard/stats: a live page for a running server. The page
// (dashboard.html, compiled in) holds no data and polls the stats; the stats are the /metrics
// counters and histograms under their Prometheus names plus the running batch, as JSON.
#pragma once
#include <string>
#include <vector>

#include "inferlab/generation/scheduler.h"
#include "server/api_error.h"
#include "server/prometheus.h"

namespace inferlab::api {

const std::string& dashboard_page();

json dashboard_stats(const MetricsSnapshot& metrics, const std::vector<SequenceSnapshot>& running,
                     const std::string& model, Clock::time_point now);

}  // namespace inferlab::api
