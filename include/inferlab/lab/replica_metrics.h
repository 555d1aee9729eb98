// `bench serve --replica-metrics URL,...`: how a run through a load balancer was spread over the
// replicas behind it, read from each replica's own /metrics (Prometheus text) before and after the
// run. The client cannot tell which replica answered a request, so the replicas' counters are the
// evidence; their sum is checked against what the client counted.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/lab/prometheus_text.h"

namespace inferlab::lab {

// The request counters of one replica, summed over label sets such as vLLM's model_name.
struct ReplicaCounters {
  std::string names;  // which metric names were read: "inferlab" or "vllm"
  double completed = 0;         // finished with stop or length
  double failed = 0;            // cancelled, timed out, errored, aborted or refused
  double generated_tokens = 0;
  double prompt_tokens = 0;
};
// inferlab's names (inferlab_requests_finished_total{reason}, inferlab_requests_rejected_total,
// inferlab_generation_tokens_total, inferlab_prompt_tokens_total) or vLLM's
// (vllm:request_success_total{finished_reason}, vllm:generation_tokens_total,
// vllm:prompt_tokens_total); none when the text has neither (not a model server, or still loading).
std::optional<ReplicaCounters> replica_counters(const std::vector<PrometheusSample>& samples);

// A replica as given ("http://host:port", with or without /v1 or /metrics) -> its /metrics URL.
// Throws Error on anything but an http(s) URL.
std::string replica_metrics_url(std::string replica);

struct ReplicaScrape {
  std::string replica;      // as given
  std::string metrics_url;
  std::optional<ReplicaCounters> counters;
  std::string error;        // why there are no counters
};
// GET <replica>/metrics once; never throws for an unreachable or unexpected replica (see error).
ReplicaScrape scrape_replica(const std::string& replica, const std::string& api_key, double timeout_s);

struct ReplicaRow {
  std::string replica, metrics_url;
  std::optional<ReplicaCounters> delta;  // after minus before; none when a scrape failed
  std::string error;
  double share = 0;  // of the replicas' completed sum
};
struct ReplicaReport {
  std::vector<ReplicaRow> rows;
  bool complete = true;  // every replica scraped before and after
  double completed = 0, failed = 0, generated_tokens = 0, prompt_tokens = 0;  // over the scraped rows
  int64_t client_completed = 0, client_output_tokens = 0;
  // The sums equal the client's successful requests / their output tokens; none when !complete.
  std::optional<bool> requests_match, tokens_match;
};
// before[i] and after[i] are the same replica. A failed scrape, or a counter that went down (the
// replica restarted), makes a row with an error and no counts, never a dropped one.
ReplicaReport replica_report(const std::vector<ReplicaScrape>& before, const std::vector<ReplicaScrape>& after,
                             int64_t client_completed, int64_t client_output_tokens);
std::string format_replica_report(const ReplicaReport& report);
nlohmann::json replica_report_json(const ReplicaReport& report);

}  // namespace inferlab::lab
