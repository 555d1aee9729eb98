// `inferlab serve [MODEL]`: the OpenAI-compatible server with continuous batching.
#include <malloc.h>
#include <unistd.h>

#include <atomic>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "inferlab/util/error.h"
#include "inferlab/hub/pull.h"
#include "inferlab/util/model_path.h"
#include "inferlab/server/server.h"

namespace {

int signal_pipe[2] = {-1, -1};
std::atomic<bool> stop_requested{false};

// Async-signal-safe: the first SIGINT/SIGTERM wakes serve(); later ones are ignored while it drains.
void on_stop_signal(int signal) {
  if (stop_requested.exchange(true)) return;
  int value = signal;
  [[maybe_unused]] auto written = write(signal_pipe[1], &value, sizeof value);
}

struct ServeArgs {
  std::string model;
  inferlab::ServerOptions server;
  std::size_t kv_tokens = 0;
  double drain_s = 30;
  bool offline = false;
};

void serve(const ServeArgs& args) {
  // One malloc arena for the whole process: the engine thread frees a batch x vocab logits buffer
  // every step (19 MB at batch 32 of a Qwen vocabulary), and in a thread arena that free space
  // sits in the arena's top chunk, which malloc_trim does not return (only the main arena's top
  // is trimmed). In the main arena the server's trim on going idle gives it back. Set before any
  // server thread allocates.
  mallopt(M_ARENA_MAX, 1);
  inferlab::ServerOptions options = args.server;
  options.scheduler.kv_tokens = args.kv_tokens;
  std::string model = args.model;
  if (model.empty()) {
    model = inferlab::default_model_path().string();
    if (!std::filesystem::is_regular_file(model))
      inferlab::fail("no MODEL given and the default model is missing at {} (scripts/setup fetches it)", model);
    std::fprintf(stderr, "inferlab serve: no MODEL given, serving the default model %s (SmolLM2-135M-Instruct)\n",
                 model.c_str());
  }
  inferlab::pull_if_missing(model, args.offline);  // before listening: a failed pull never looks like a server

  // A handler, not a blocked mask: threads started before main (OpenBLAS) would otherwise take
  // the default action and kill the process. The handler only writes to a pipe.
  if (pipe(signal_pipe) != 0) inferlab::fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  inferlab::Server server(options);
  int port = server.start();
  std::fprintf(stderr, "inferlab serve: listening on http://%s:%d (loading %s; /health is 503 until ready)\n",
               options.http.host.c_str(), port, model.c_str());
  if (options.http.api_key.empty()) {
    if (inferlab::is_loopback_host(options.http.host))
      std::fprintf(stderr, "inferlab serve: no API key (--api-key or INFERLAB_API_KEY), so it listens on %s only: "
                           "reachable from this machine alone\n", options.http.host.c_str());
    else
      std::fprintf(stderr, "inferlab serve: warning: listening on %s with no API key (--api-key or INFERLAB_API_KEY): "
                           "anyone who can reach this address can use the server\n", options.http.host.c_str());
  } else {
    std::fprintf(stderr, "inferlab serve: API key required on every endpoint but /health (and the /dashboard page, which asks for it)\n");
  }
  server.load(model);
  std::fprintf(stderr, "inferlab serve: ready, model name '%s' — try: curl http://%s:%d/v1/models\n",
               server.model_name().c_str(), options.http.host.c_str(), port);

  int received = 0;
  while (read(signal_pipe[0], &received, sizeof received) != sizeof received) {
  }
  std::fprintf(stderr, "inferlab serve: %s received, finishing in-flight requests (up to %.0f s)\n",
               received == SIGINT ? "SIGINT" : "SIGTERM", args.drain_s);
  server.shutdown(std::chrono::milliseconds(static_cast<long>(args.drain_s * 1000)));
  std::fprintf(stderr, "inferlab serve: stopped\n");
}

inferlab::cli::Registrar reg([](CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API with continuous batching");
  cmd->add_option("model", args->model, "Model folder, GGUF file or Hugging Face repo id, pulled into the cache when missing "
                  "(default: SmolLM2-135M-Instruct Q4_1)");
  cmd->add_flag("--offline", args->offline,
                "Never download: a repo id must already be in the Hugging Face cache (as HF_HUB_OFFLINE=1)");
  cmd->add_option("--host", args->server.http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->server.http.port, "Port (0: any free port)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--max-batch", args->server.scheduler.max_batch, "Sequences running together")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--kv-tokens", args->kv_tokens, "KV cache capacity in tokens (default: max-batch contexts, capped near 1 GiB)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 32));
  inferlab::cli::add_kv_type_option(*cmd, args->server.scheduler.kv_type);
  cmd->add_option("--block-size", args->server.scheduler.block_size, "KV positions per block")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--step-tokens", args->server.scheduler.step_token_budget, "Prompt tokens computed per step (chunked prefill)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-queue", args->server.scheduler.max_waiting, "Queued requests before answering 503")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("!--no-prefix-caching", args->server.scheduler.prefix_caching, "Do not reuse KV blocks of shared prompt prefixes");
  inferlab::cli::add_speculative_options(*cmd, args->server.scheduler.speculative);
  cmd->add_option("--threads", args->server.threads, "Compute threads for the model (0: all cores)")->capture_default_str();
  cmd->add_option("--weights", args->server.weights, "Matmul weights: auto (as stored), f32, bf16, int8, q4")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f32", "bf16", "int8", "q4"}));
  cmd->add_option("--output-weights", args->server.output_weights, "Output projection (lm_head, or the tied embedding): auto (int8 under --weights q4, like llama-quantize's Q4 mixes; else as --weights), f32, bf16, int8, q4")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f32", "bf16", "int8", "q4"}));
  cmd->add_option("--http-threads", args->server.http.http_threads, "Event-loop threads serving every HTTP connection")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--max-connections", args->server.http.max_connections,
                  "Connections admitted at once; beyond: 503 + Retry-After and closed (0: 8192)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--header-timeout", args->server.http.header_timeout_s,
                  "Seconds for a request's line and headers to arrive (408 and closed after; also the keep-alive idle time)")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--body-timeout", args->server.http.body_timeout_s, "Seconds for a request's body to arrive once its headers did (408)")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--max-header-bytes", args->server.http.max_header_bytes, "Largest request line + headers (431 above)")
      ->capture_default_str()->check(CLI::Range(std::size_t{256}, std::size_t{1} << 24));
  cmd->add_option("--max-header-count", args->server.http.max_header_count, "Most header fields in a request (431 above)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--engine-stall-timeout", args->server.engine_stall_s,
                  "/health answers 503 when the engine made no step for this many seconds with work queued (0: never)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--metrics-compat", args->server.metrics_compat,
                  "Also export the router-facing gauges under another server's names (vllm: vllm:num_requests_waiting, ...)")
      ->check(CLI::IsMember({"vllm"}));
  cmd->add_option("--chat-template-kwargs", args->server.chat_template_kwargs,
                  "JSON object of chat template variables every chat gets unless its request's chat_template_kwargs sets "
                  "them, e.g. '{\"enable_thinking\": false}' to have Qwen3 answer without thinking");
  cmd->add_option("--reasoning-format", args->server.reasoning_format,
                  "A thinking model's thoughts (<think>...</think>): auto (returned apart, as reasoning_content), none (left in "
                  "the text); a request's reasoning_format overrides it")
      ->capture_default_str()->check(CLI::IsMember({"auto", "none"}));
  cmd->add_flag("--test-hooks", args->server.test_hooks,
                "Accept the request field 'test_forced_output' (tokens the sampler picks while a grammar allows them): for "
                "tests of the server's parsing with random-weight models; never in production");
  cmd->add_option("--served-model-name", args->server.served_model_name, "Name clients use in 'model' (default: the folder name)");
  cmd->add_option("--timeout", args->server.request_timeout_s, "Per-request timeout in seconds (0: none)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--max-n", args->server.max_n, "Largest n (choices per request)")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--drain", args->drain_s, "Seconds to let in-flight requests finish on SIGINT/SIGTERM")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_flag("--log-requests", args->server.http.log_requests, "Print one line per HTTP request");
  cmd->add_flag("!--no-timings", args->server.timings, "Leave the server-side `timings` object out of responses");
  cmd->add_option("--sse-ping-interval", args->server.sse_ping_interval_s,
                  "Seconds a stream may stay silent (queue wait, long prefill) before a ': ping' SSE comment (0: none)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--api-key", args->server.http.api_key,
                  "Require 'Authorization: Bearer KEY' on every endpoint but /health and the static /dashboard page (prefer the env variable: "
                  "arguments are visible to other users)")->envname("INFERLAB_API_KEY");
  cmd->add_option("--allowed-hosts", args->server.http.allowed_hosts,
                  "Host header names answered besides localhost, 127.0.0.1, [::1] and the bound address, comma-separated "
                  "('*': any; on a non-loopback --host the check is off unless this is given); others get 403");
  cmd->add_option("--allowed-origins", args->server.http.allowed_origins,
                  "Web origins (e.g. https://app.example) whose pages may call the server, comma-separated ('*': any); "
                  "they get CORS headers, requests with another Origin get 403 (default: none)");
  cmd->add_option("--max-body-bytes", args->server.http.max_body_bytes, "Largest request body (413 above)")
      ->capture_default_str()->check(CLI::Range(std::size_t{64}, std::size_t{1} << 32));
  cmd->add_option("--max-messages", args->server.max_messages, "Most chat messages per request")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-prompt-tokens", args->server.max_prompt_tokens, "Longest prompt in tokens (0: the context length)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--responses-store-size", args->server.responses_store_size,
                  "Finished /v1/responses kept for GET /v1/responses/{id} and previous_response_id; past it the least "
                  "recently used goes and its id answers 404 (0: none kept)")
      ->capture_default_str()->check(CLI::Range(std::size_t{0}, std::size_t{1} << 24));
  cmd->add_option("--max-json-depth", args->server.max_json_depth, "Deepest nesting of arrays and objects in a request body")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  cmd->add_option("--max-prompt-bytes", args->server.max_prompt_bytes,
                  "Longest prompt text in bytes, checked before tokenizing (0: the prompt token limit times the longest token)")
      ->capture_default_str()->check(CLI::Range(std::size_t{0}, std::size_t{1} << 32));
  cmd->add_option("--max-tokens-limit", args->server.max_tokens_limit, "Largest max_tokens (0: the context length)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-grammar-bytes", args->server.max_grammar_bytes,
                  "Largest grammar for constrained decoding: GBNF given, or written from a JSON schema or regex (400 above)")
      ->capture_default_str()->check(CLI::Range(std::size_t{64}, std::size_t{1} << 26));
  cmd->add_option("--max-regex-bytes", args->server.max_regex_bytes, "Longest 'regex' field or schema 'pattern' (400 above)")
      ->capture_default_str()->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cmd->add_option("--max-schema-depth", args->server.max_schema_depth, "Deepest nesting of schemas in a JSON schema (400 above)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--slow-client-timeout", args->server.http.slow_client_timeout_s,
                  "Drop a client that reads nothing for this many seconds")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--send-buffer-bytes", args->server.http.send_buffer_bytes,
                  "Kernel send buffer per connection (0: the OS default, autotuned up to 4 MiB)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 30));
  cmd->callback([args] { serve(*args); });
});

}  // namespace
