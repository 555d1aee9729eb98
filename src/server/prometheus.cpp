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
  auto scalar = [&](const char* name, const char* type, const char* help, auto value) {
    metric(name, type, help);
    out += fmt::format("{} {}\n", name, value);
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
  scalar("inferlab_http_connections", "gauge", "connections admitted (served or waiting for an HTTP worker)", snapshot.admitted_connections);
  scalar("inferlab_http_connections_refused_total", "counter", "connections beyond --max-connections, answered 503", snapshot.refused_connections);
  scalar("inferlab_memory_trims_total", "counter", "times freed heap memory was returned to the OS on going idle", snapshot.memory_trims);
  scalar("inferlab_model_ready", "gauge", "1 once the model is loaded and requests are served", snapshot.model_ready ? 1 : 0);
  metric("inferlab_http_requests_total", "counter", "HTTP requests answered, by path and status");
  for (const auto& [key, count] : snapshot.http_requests)
    out += fmt::format("inferlab_http_requests_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  if (!snapshot.engine) return out;
  const SchedulerStats& s = *snapshot.engine;
  scalar("inferlab_requests_submitted_total", "counter", "generation requests (choices) accepted by the scheduler", s.requests_submitted);
  scalar("inferlab_requests_rejected_total", "counter", "generation requests refused (never fits, queue full, shutting down)", s.requests_rejected);
  metric("inferlab_requests_finished_total", "counter", "generation requests finished, by reason");
  for (FinishReason r : {FinishReason::stop, FinishReason::length, FinishReason::cancelled, FinishReason::timeout, FinishReason::error})
    out += fmt::format("inferlab_requests_finished_total{{reason=\"{}\"}} {}\n", to_string(r), s.requests_finished[static_cast<int>(r)]);
  scalar("inferlab_queue_length", "gauge", "requests waiting for a batch slot or KV blocks", s.waiting);
  scalar("inferlab_running_requests", "gauge", "sequences in the running batch", s.running);
  scalar("inferlab_active_streams", "gauge", "streaming HTTP responses open", snapshot.active_streams);
  scalar("inferlab_prompt_tokens_total", "counter", "prompt tokens submitted", s.prompt_tokens);
  scalar("inferlab_prefill_tokens_total", "counter", "prompt tokens computed (the rest came from the prefix cache)", s.prefill_tokens);
  scalar("inferlab_prefix_cache_hit_tokens_total", "counter", "prompt tokens reused from cached KV blocks", s.prefix_cache_hit_tokens);
  scalar("inferlab_generation_tokens_total", "counter", "tokens generated", s.generation_tokens);
  scalar("inferlab_embedding_requests_total", "counter", "embedding inputs answered (each input of /v1/embeddings)", s.embedding_requests);
  scalar("inferlab_embedding_tokens_total", "counter", "input tokens of the answered embeddings", s.embedding_tokens);
  scalar("inferlab_engine_steps_total", "counter", "engine steps (one batched forward each)", s.steps);
  scalar("inferlab_decode_steps_total", "counter", "steps that decoded at least one sequence", s.decode_steps);
  scalar("inferlab_batched_decode_steps_total", "counter", "steps that decoded more than one sequence together", s.batched_decode_steps);
  scalar("inferlab_spec_decode_draft_tokens_total", "counter", "speculative decoding: tokens proposed by prompt lookup", s.draft_tokens);
  scalar("inferlab_spec_decode_accepted_tokens_total", "counter", "speculative decoding: proposed tokens the model kept", s.accepted_draft_tokens);
  scalar("inferlab_preemptions_total", "counter", "sequences preempted (KV recomputed later) when blocks ran out", s.preemptions);
  scalar("inferlab_kv_cache_blocks_total", "gauge", "KV cache blocks in the pool", s.kv_blocks_total);
  scalar("inferlab_kv_cache_blocks_used", "gauge", "KV cache blocks held by queued or running sequences", s.kv_blocks_in_use);
  scalar("inferlab_kv_cache_blocks_cached", "gauge", "KV cache blocks held only by the prefix cache (evictable)", s.kv_blocks_cached);
  scalar("inferlab_kv_cache_usage_ratio", "gauge", "fraction of KV blocks held by sequences", s.kv_blocks_total ? double(s.kv_blocks_in_use) / s.kv_blocks_total : 0.0);
  scalar("inferlab_kv_cache_block_size", "gauge", "token positions per KV block", s.block_size);
  metric("inferlab_kv_cache_config_info", "gauge", "KV cache layout (labels, named as the endpoint picker parses them): token positions per block, blocks in the pool");
  out += fmt::format("inferlab_kv_cache_config_info{{block_size=\"{}\",num_gpu_blocks=\"{}\"}} 1\n", s.block_size, s.kv_blocks_total);
  if (snapshot.vllm_names) {
    // What vLLM's production-stack router and the llm-d endpoint picker read by default.
    scalar("vllm:num_requests_waiting", "gauge", "requests waiting (inferlab_queue_length)", s.waiting);
    scalar("vllm:num_requests_running", "gauge", "requests running (inferlab_running_requests)", s.running);
    scalar("vllm:kv_cache_usage_perc", "gauge", "KV cache usage, 0-1 (inferlab_kv_cache_usage_ratio)",
           s.kv_blocks_total ? double(s.kv_blocks_in_use) / s.kv_blocks_total : 0.0);
    scalar("vllm:spec_decode_num_draft_tokens_total", "counter", "drafted tokens (inferlab_spec_decode_draft_tokens_total)", s.draft_tokens);
    scalar("vllm:spec_decode_num_accepted_tokens_total", "counter", "accepted drafted tokens (inferlab_spec_decode_accepted_tokens_total)", s.accepted_draft_tokens);
    metric("vllm:cache_config_info", "gauge", "KV cache configuration (inferlab_kv_cache_config_info)");
    out += fmt::format("vllm:cache_config_info{{block_size=\"{}\",num_gpu_blocks=\"{}\"}} 1\n", s.block_size, s.kv_blocks_total);
  }
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
