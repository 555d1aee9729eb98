// What OpenAI's two choices-shaped answers (chat.completion and text_completion) share: the
// envelope (id, object, created, model, system_fingerprint, choices, usage), `usage` with the
// details OpenAI's clients read, `timings` at the top for one choice and per choice for several,
// chunks carrying `usage: null` when the stream's usage was asked, the finish chunk with its
// choice's timings, the usage chunk, the error event and `data: [DONE]`. A subclass gives its
// object names and the per-choice items.
#pragma once
#include <ctime>
#include <optional>
#include <set>
#include <string>

#include "server/response_writer.h"

namespace inferlab::api {

class OpenAiChoicesWriter : public ResponseWriter {
 public:
  struct Names {
    const char* id_prefix;     // "chatcmpl-"
    const char* object;        // the body's object: "chat.completion"
    const char* chunk_object;  // a chunk's object: "chat.completion.chunk"
  };

  json body(const Completion& completion) const final;
  void stream_start(const Completion& completion, std::string& out) final;
  void stream_delta(const Completion& completion, const Choice& choice, const Delta& delta, std::string& out) final;
  void stream_finish(const Completion& completion, const Choice& choice, std::string& out) final;
  void stream_end(const Completion& completion, std::string& out) final;
  void stream_error(const ApiError& error, std::string& out) final;

 protected:
  OpenAiChoicesWriter(Names names, std::string model_name, std::string system_fingerprint);

  // The shape's own fields of a choice in the whole body (message or text, logprobs).
  virtual json choice_fields(const Completion& completion, const Choice& choice) const = 0;
  // Streaming items: the first one (none: nothing before the tokens; written with the choice's
  // first token, see stream_start), one per delta (none: nothing new to say), the last one (with
  // the finish reason).
  virtual std::optional<json> opening_item(const Completion& completion, const Choice& choice) const = 0;
  virtual std::optional<json> delta_item(const Completion& completion, const Choice& choice, const Delta& delta) const = 0;
  virtual json finish_item(const Choice& choice) const = 0;

 private:
  json chunk(const Completion& completion, json choice_items) const;
  // Writes the choice's opening item the first time the choice has something to stream.
  void open(const Completion& completion, const Choice& choice, std::string& out);

  Names names_;
  std::string model_name_;
  std::string system_fingerprint_;
  std::string id_;
  std::time_t created_;
  std::set<int> opened_;  // indices of the choices whose opening item is written
};

}  // namespace inferlab::api
