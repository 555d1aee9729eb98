// The /metrics text (see prometheus.h): one HELP/TYPE block per metric, histograms cumulative.
#include "server/prometheus.h"

#include <fmt/format.h>

#include "inferlab/util/process_memory.h"
#include "inferlab/util/stats.h"

namespace inferlab::api {

std::string prometheus_text(const MetricsSnapshot& snapshot) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    metric(name, "histogram", help);
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds[i], cumulative);
    }
    cumulative += h.counts.back();
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, h.sum, name, h.count);
  };
  metric("process_resident_memory_bytes", "gauge", "resident set size of the server process in bytes");
  if (auto rss = resident_bytes()) out += fmt::format("process_resident_memory_bytes {}\n", *rss);
  metric("inferlab_http_connections", "gauge", "connections admitted (served or waiting for an HTTP worker)");
  out += fmt::format("inferlab_http_connections {}\n", snapshot.admitted_connections);
  metric("inferlab_http_connections_refused_total", "counter", "connections beyond --max-connections, answered 503");
  out += fmt::format("inferlab_http_connections_refused_total {}\n", snapshot.refused_connections);
  metric("inferlab_memory_trims_total", "counter", "times freed heap memory was returned to the OS on going idle");
  out += fmt::format("inferlab_memory_trims_total {}\n", snapshot.memory_trims);
  metric("inferlab_model_ready", "gauge", "1 once the model is loaded and requests are served");
  out += fmt::format("inferlab_model_ready {}\n", snapshot.model_ready ? 1 : 0);
  metric("inferlab_http_requests_total", "counter", "HTTP requests answered, by path and status");
  for (const auto& [key, count] : snapshot.http_requests)
    out += fmt::format("inferlab_http_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  if (!snapshot.engine) return out;
  const SchedulerStats& s = *snapshot.engine;
  metric("inferlab_requests_submitted_total", "counter", "generation requests (choices) accepted by the scheduler");
  out += fmt::format("inferlab_requests_submitted_total {}\n", s.requests_submitted);
  metric("inferlab_requests_rejected_total", "counter", "generation requests refused (never fits, queue full, shutting down)");
  out += fmt::format("inferlab_requests_rejected_total {}\n", s.requests_rejected);
  metric("inferlab_requests_finished_total", "counter", "generation requests finished, by reason");
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::cancelled, FinishReason::timeout, FinishReason::error})
    out += fmt::format("inferlab_requests_finished_total{{reason=\"{}\"}} {}\n", to_string(r), s.requests_finished[static_cast<int>(r)]);
  metric("inferlab_queue_length", "gauge", "requests waiting for a batch slot or KV blocks");
  out += fmt::format("inferlab_queue_length {}\n", s.waiting);
  metric("inferlab_running_requests", "gauge", "sequences in the running batch");
  out += fmt::format("inferlab_running_requests {}\n", s.running);
  metric("inferlab_active_streams", "gauge", "streaming HTTP responses open");
  out += fmt::format("inferlab_active_streams {}\n", snapshot.active_streams);
  metric("inferlab_prompt_tokens_total", "counter", "prompt tokens submitted");
  out += fmt::format("inferlab_prompt_tokens_total {}\n", s.prompt_tokens);
  metric("inferlab_prefill_tokens_total", "counter", "prompt tokens computed (the rest came from the prefix cache)");
  out += fmt::format("inferlab_prefill_tokens_total {}\n", s.prefill_tokens);
  metric("inferlab_prefix_cache_hit_tokens_total", "counter", "prompt tokens reused from cached KV blocks");
  out += fmt::format("inferlab_prefix_cache_hit_tokens_total {}\n", s.prefix_cache_hit_tokens);
  metric("inferlab_generation_tokens_total", "counter", "tokens generated");
  out += fmt::format("inferlab_generation_tokens_total {}\n", s.generation_tokens);
  metric("inferlab_engine_steps_total", "counter", "engine steps (one batched forward each)");
  out += fmt::format("inferlab_engine_steps_total {}\n", s.steps);
  metric("inferlab_decode_steps_total", "counter", "steps that decoded at least one sequence");
  out += fmt::format("inferlab_decode_steps_total {}\n", s.decode_steps);
  metric("inferlab_batched_decode_steps_total", "counter", "steps that decoded more than one sequence together");
  out += fmt::format("inferlab_batched_decode_steps_total {}\n", s.batched_decode_steps);
  metric("inferlab_preemptions_total", "counter", "sequences preempted (KV recomputed later) when blocks ran out");
  out += fmt::format("inferlab_preemptions_total {}\n", s.preemptions);
  metric("inferlab_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool");
  out += fmt::format("inferlab_kv_cache_blocks_total {}\n", s.kv_blocks_total);
  metric("inferlab_kv_cache_blocks_used", "gauge", "KV cache blocks held by queued or running sequences");
  out += fmt::format("inferlab_kv_cache_blocks_used {}\n", s.kv_blocks_in_use);
  metric("inferlab_kv_cache_blocks_cached", "gauge", "KV cache blocks held only by the prefix cache (evictable)");
  out += fmt::format("inferlab_kv_cache_blocks_cached {}\n", s.kv_blocks_cached);
  metric("inferlab_kv_cache_usage_ratio", "gauge", "fraction of KV blocks held by sequences");
  out += fmt::format("inferlab_kv_cache_usage_ratio {}\n", s.kv_blocks_total ? double(s.kv_blocks_in_use) / s.kv_blocks_total : 0.0);
  metric("inferlab_kv_cache_block_size", "gauge", "token positions per KV block");
  out += fmt::format("inferlab_kv_cache_block_size {}\n", s.block_size);
  histogram("inferlab_decode_batch_size", "sequences decoded per decode step", s.decode_batch_size);
  histogram("inferlab_time_to_first_token_seconds", "arrival to first generated token", s.time_to_first_token);
  histogram("inferlab_inter_token_latency_seconds", "time between consecutive tokens of a sequence", s.inter_token_latency);
  histogram("inferlab_e2e_request_latency_seconds", "arrival to finish (queue + prefill + decode)", s.e2e_latency);
  histogram("inferlab_request_queue_seconds", "arrival to first admitted to the running batch", s.queue_time);
  histogram("inferlab_request_prefill_seconds", "first admitted to first generated token", s.prefill_time);
  histogram("inferlab_request_decode_seconds", "first generated token to finish", s.decode_time);
  return out;
}

}  // namespace inferlab::api
