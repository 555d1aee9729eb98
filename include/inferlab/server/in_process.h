// The server's generation routes answered in-process, without HTTP: an Engine with the request
// parsing and limits of /v1/chat/completions and /v1/completions, and the same per-choice
// following (stop strings, tool calls, the reasoning split, logprobs). The Python package
// (python/) drives the engine through this, so its requests are checked and answered exactly as
// the server's are. Bodies go in as the routes' JSON; progress comes back as JSON text.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "inferlab/generation/engine.h"
#include "inferlab/server/server.h"
#include "inferlab/util/error.h"

namespace inferlab {

// What the route would answer with a 4xx: the status, OpenAI's `param` (the field at fault, may be
// empty) and the server's message.
class RequestError : public Error {
 public:
  RequestError(int status, const std::string& message, std::string param)
      : Error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// One submitted request: a choice per prompt and n, each followed as the server follows it.
// Going away cancels every choice still running (its sequence and KV blocks are freed).
class InProcessRequest {
 public:
  virtual ~InProcessRequest() = default;
  // Waits up to `timeout` for news of any choice, then returns a JSON array with one object per
  // choice that showed something since the last call: {"index", "prompt_index", "text",
  // "reasoning", "token_ids", "logprobs": [{"token", "text", "logprob", "top": [[id, logprob, text],
  // ...]}] and, once settled, "tool_calls": [{"id", "name", "arguments"}], "finish_reason",
  // "stop_reason" (the stop string met, or null) and "timings"}.
  // A choice that failed throws: RequestError for what the request asked (a grammar too ambiguous
  // to follow), Error for the engine's failures; cancelled choices end with finish_reason
  // "cancelled".
  virtual std::string poll(std::chrono::milliseconds timeout) = 0;
  virtual bool done() const = 0;  // every choice settled
  virtual void cancel() = 0;      // frees every running choice now; they end as "cancelled"
  // The prompts as the engine got them: a JSON array of token-id arrays, in prompt order.
  virtual std::string prompt_token_ids() const = 0;
};

class InProcessServer {
 public:
  // Loads the model as `inferlab serve` does with these options (threads, weights, scheduler,
  // limits, chat template kwargs; the HTTP ones are unused).
  InProcessServer(const std::string& model, const ServerOptions& options);
  ~InProcessServer();
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  const Engine& engine() const;
  // task(model) with the engine's own model, on its thread between two steps (Engine::run_on_model):
  // the Python package's step-by-step forward pass, on the weights already loaded.
  void run_on_model(const std::function<void(Model&)>& task);
  // route: "chat" (/v1/chat/completions' body) or "completions" (/v1/completions'); `stream` in
  // the body is ignored (poll() gives the progress either way). RequestError for what the route
  // answers with a 4xx, OverloadedError when the engine's queue is full.
  std::unique_ptr<InProcessRequest> submit(const std::string& route, const std::string& body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferlab
