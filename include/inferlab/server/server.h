// OpenAI-compatible HTTP server (an event loop on Boost.Beast/Asio, src/server/http_server.cpp): /v1/models, /v1/chat/completions, /v1/completions,
// /health, /metrics, /tokenize, /detokenize, served from one Engine (continuous batching).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "inferlab/generation/scheduler.h"
#include "inferlab/server/http_options.h"

namespace inferlab {

struct ServerOptions {
  HttpOptions http;                // where it listens, and the transport's limits (http_options.h)
  std::string served_model_name;   // empty: the model folder's name (or the repo id given)
  SchedulerOptions scheduler;
  int threads = 0;                 // model compute threads (0: all cores)
  std::string weights = "auto";    // matmul weights: auto (as stored), f32, bf16, int8, q4
  std::string output_weights = "auto";  // LoadOptions::output_weights
  double request_timeout_s = 600;  // per request, from arrival; 0: none
  int max_n = 16;                  // largest `n` (choices per request)
  bool timings = true;             // a `timings` object in every answer (docs/measurement.md)
  std::size_t responses_store_size = 1024;  // /v1/responses kept for GET and previous_response_id; past it the
                                           // least recently used goes (0: none kept)
  double sse_ping_interval_s = 30; // a `: ping` SSE comment after this long with nothing sent (0: none);
                                   // 30 s is llama.cpp's default (its PR #24013)
  // Security and limits (docs/reliability.md). Every limit answers with an OpenAI-shaped error.
  int max_messages = 1024;              // more chat messages: 400
  int max_prompt_tokens = 0;            // longer prompts: 400 (0: the context length)
  int max_tokens_limit = 0;             // larger max_tokens: 400; the default is capped to it (0: the context)
  int max_json_depth = 64;              // arrays/objects nested deeper in a request body: 400
  std::size_t max_prompt_bytes = 0;     // longer prompt texts: 400 before tokenizing (0: the prompt token
                                        // limit times the vocabulary's longest token)
  double engine_stall_s = 30;           // /health 503 when the engine made no step this long with work queued (0: off)
  std::string metrics_compat;           // "vllm": /metrics also under vLLM's names (routers read them)
  std::string chat_template_kwargs;      // JSON object: the template variables every chat gets unless it sets them
                                        // (e.g. {"enable_thinking": false}); empty: none
  std::string reasoning_format = "auto";  // a thinking model's thoughts: auto (apart), none (left in the text)
  bool test_hooks = false;              // accept 'test_forced_output' (SamplingParams::forced_tokens)
  std::size_t max_grammar_bytes = 64 * 1024;  // constrained decoding: GBNF given or written from a schema / regex: 400
  std::size_t max_regex_bytes = 4 * 1024;     // a 'regex' field or schema 'pattern': 400
  int max_schema_depth = 32;                  // schemas nested in a JSON schema: 400
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts answering in the background (/health says 503 until load() is done).
  // Throws Error when the address cannot be bound. Returns the port.
  int start();
  int port() const;

  // Loads the model and tokenizer and starts the scheduler; then /health says 200.
  void load(const std::string& model);

  // Graceful stop: refuse new requests, let in-flight ones finish for up to `drain`, end the
  // rest with an error event, close the listener.
  void shutdown(std::chrono::milliseconds drain);

  const std::string& model_name() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost): serving there
// without an API key is safe.
bool is_loopback_host(const std::string& host);

}  // namespace inferlab
