// How one API shape writes a Completion out: the whole body, or a stream's server-sent events.
// The Completion (completion.h) holds everything the APIs share (choices, text through the stop
// strings, tool calls, logprobs as the engine gave them, token counts, timings); a writer only
// lays it out. One shape is one file under responses/ and one factory line here.
#pragma once
#include <memory>
#include <string>

#include "server/api_error.h"
#include "server/completion.h"

namespace inferlab::api {

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;

  // The whole answer, once every choice is settled and none failed.
  virtual json body(const Completion& completion) const = 0;

  // A stream: each call appends SSE text to `out` (framed with sse_stream.h's sse_data).
  virtual void stream_start(const Completion& completion, std::string& out) = 0;  // before any token
  // What one poll of a choice showed (may be nothing new: then write nothing).
  virtual void stream_delta(const Completion& completion, const Choice& choice, const Delta& delta, std::string& out) = 0;
  virtual void stream_finish(const Completion& completion, const Choice& choice, std::string& out) = 0;  // the choice settled
  virtual void stream_end(const Completion& completion, std::string& out) = 0;  // every choice settled: the last events
  // The stream ends with this error (past the headers an error travels as an event).
  virtual void stream_error(const ApiError& error, std::string& out) = 0;
};

// The shapes. `model_name` and `system_fingerprint` go into every body and chunk.
std::unique_ptr<ResponseWriter> chat_completion_writer(std::string model_name, std::string system_fingerprint);  // responses/chat_completion.cpp
std::unique_ptr<ResponseWriter> text_completion_writer(std::string model_name, std::string system_fingerprint);  // responses/text_completion.cpp
// /v1/responses: `echo` holds the request fields the response object carries, `conversation` the
// input items the store keeps before the output; `store` null: not kept.
class ResponseStore;
std::unique_ptr<ResponseWriter> openai_response_writer(std::string model_name, json echo, json conversation,
                                                       std::shared_ptr<ResponseStore> store);  // responses/openai_response.cpp
std::unique_ptr<ResponseWriter> anthropic_message_writer(std::string model_name);  // responses/anthropic_message.cpp

// Anthropic's error shape {"type": "error", "error": {"type", "message"}}, its type from the status
// (the ErrorShape of Anthropic's routes; also the stream's `event: error`).
json anthropic_error_body(const ApiError& error);

}  // namespace inferlab::api
