#include "server/server_info.h"
#include "inferlab/util/build_info.h"

namespace inferlab::api {

json server_info(const ServerOptions& o, int bound_port, const std::string& model_name, const std::string& model_path,
                 const ModelContext& context) {
  const SchedulerOptions& s = o.scheduler;
  return {{"server", "inferlab"},
          {"version", inferlab_version()},
          {"git_commit", inferlab_git_commit()},
          {"model", model_name},
          {"model_path", model_path},
          // The flags, named as on the command line (without "--", "-" as "_").
          {"flags",
           {{"host", o.http.host},
            {"port", bound_port},
            {"served_model_name", o.served_model_name},
            {"max_batch", s.max_batch},
            {"kv_tokens", s.kv_tokens},
            {"block_size", s.block_size},
            {"kv_type", kv_type_name(s.kv_type)},
            {"step_tokens", s.step_token_budget},
            {"max_queue", s.max_waiting},
            {"prefix_caching", s.prefix_caching},
            {"speculative", s.speculative.method},
            {"draft_max", s.speculative.draft_max},
            {"ngram_max", s.speculative.ngram_max},
            {"ngram_min", s.speculative.ngram_min},
            {"threads", o.threads},
            {"weights", o.weights},
            {"output_weights", o.output_weights},
            {"http_threads", o.http.http_threads},
            {"max_connections", o.http.max_connections},
            {"timeout", o.request_timeout_s},
            {"max_n", o.max_n},
            {"log_requests", o.http.log_requests},
            {"timings", o.timings},
            {"api_key_required", !o.http.api_key.empty()},  // never the key itself
            {"allowed_hosts", o.http.allowed_hosts},
            {"allowed_origins", o.http.allowed_origins},
            {"max_body_bytes", o.http.max_body_bytes},
            {"max_messages", o.max_messages},
            {"max_prompt_tokens", o.max_prompt_tokens},
            {"max_tokens_limit", o.max_tokens_limit},
            {"max_json_depth", o.max_json_depth},
            {"max_prompt_bytes", o.max_prompt_bytes},
            {"slow_client_timeout", o.http.slow_client_timeout_s},
            {"send_buffer_bytes", o.http.send_buffer_bytes},
            {"responses_store_size", o.responses_store_size}}},
          // What the flags' defaults (0: automatic) became once the model was loaded.
          {"resolved",
           {{"context_length", context.context_length},
            {"kv_capacity_tokens", context.kv_capacity_tokens},
            {"vocab_size", context.vocab_size},
            {"max_prompt_bytes", prompt_byte_limit(context, true)}}}};
}

}  // namespace inferlab::api
