// The handlers' shared state (see server_state.h): the options the transport takes, readiness,
// the stall rule and the metrics reading.
#include "server/server_state.h"

#include <algorithm>

#include "inferlab/util/error.h"

namespace inferlab::api {

ModelContext model_context_of(const Engine& engine, const ServerOptions& options) {
  ModelContext context;
  context.text = &engine.text();
  context.accepted_names = engine.accepted_names();
  context.context_length = engine.context_length();
  context.vocab_size = engine.vocab_size();
  context.kv_capacity_tokens = engine.kv_capacity_tokens();
  context.generates = engine.generates();
  context.embedding_dimensions = engine.embedding_dimensions();
  context.max_embedding_input_tokens = engine.max_embedding_input_tokens();
  context.reasoning = reasoning_markers_for(engine.text().chat_template_source());
  if (context.reasoning) {
    auto one_token = [&](const std::string& marker) {
      const auto ids = engine.text().tokenize(marker, false);
      return ids.size() == 1 ? ids.front() : -1;
    };
    context.reasoning_tokens = {one_token(context.reasoning->start), one_token(context.reasoning->end)};
  }
  context.separate_reasoning = options.reasoning_format != "none";
  context.test_hooks = options.test_hooks;
  if (!options.chat_template_kwargs.empty()) {
    context.template_defaults = json::parse(options.chat_template_kwargs, nullptr, false);
    if (!context.template_defaults.is_object())
      fail("--chat-template-kwargs must be a JSON object, got '{}'", options.chat_template_kwargs);
  }
  context.limits = {.max_n = options.max_n,
                    .max_messages = options.max_messages,
                    .max_prompt_tokens = options.max_prompt_tokens,
                    .max_tokens = options.max_tokens_limit,
                    .max_json_depth = options.max_json_depth,
                    .max_prompt_bytes = options.max_prompt_bytes,
                    .grammar = {}};
  context.limits.grammar.max_grammar_bytes = options.max_grammar_bytes;
  context.limits.grammar.max_regex_bytes = options.max_regex_bytes;
  context.limits.grammar.max_schema_depth = options.max_schema_depth;
  for (int32_t id = 0; id < engine.text().vocab_size(); ++id)
    context.longest_token_bytes = std::max(context.longest_token_bytes, engine.text().token_bytes(id).size());
  return context;
}

ServerState::ServerState(ServerOptions o)
    : options(std::move(o)), http(options.http), responses(std::make_shared<ResponseStore>(options.responses_store_size)) {}

void ServerState::require_ready() const {
  if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_error");
  if (!ready) throw ApiError(503, "the model is still loading; retry when GET /health returns 200", "", "loading", "server_error");
}

bool ServerState::engine_stalled() const {
  return options.engine_stall_s > 0 && engine && !engine->idle() && engine->seconds_since_progress() > options.engine_stall_s;
}

MetricsSnapshot ServerState::metrics() const {
  MetricsSnapshot m;
  m.admitted_connections = http.admitted_connections();
  m.refused_connections = http.refused_connections();
  m.memory_trims = memory_trims;
  m.model_ready = ready && !draining;
  m.http_requests = http.request_counts();
  if (engine) m.engine = engine->stats();
  m.active_streams = active_streams;
  m.vllm_names = options.metrics_compat == "vllm";
  return m;
}

}  // namespace inferlab::api
