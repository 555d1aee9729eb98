// The serving engine: one model with its tokenizer, chat template and continuous-batching
// Scheduler, and the policies a server applies to them (the tokenizer found next to the model,
// the EOS set, the vocabulary limit, per-choice seeds, the served name). A server talks to the
// engine only: it submits requests, tokenizes, detokenizes, renders chats and reads stats.
#pragma once
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inferlab/generation/scheduler.h"
#include "inferlab/grammar/grammar.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

class ChatTemplate;
class CompiledGrammar;
class TokenVocabulary;

// The text side of the engine: tokenizer and chat template. Apart from Engine so that request
// parsing can be tested and fuzzed with a tokenizer alone, without model weights.
class EngineText {
 public:
  // Compiles the tokenizer's chat template; a template that does not compile leaves the engine
  // without one (chat_template_error() says why).
  explicit EngineText(std::shared_ptr<const Tokenizer> tokenizer);
  ~EngineText();

  std::vector<int32_t> tokenize(std::string_view text, bool add_special_tokens) const;
  std::string detokenize(std::span<const int32_t> ids) const;  // special tokens kept
  std::string token_text(int32_t id) const;   // one token alone (a partial UTF-8 character shows as U+FFFD)
  std::string token_bytes(int32_t id) const;  // one token's raw bytes
  std::string token_piece(int32_t id) const;  // its vocabulary string, e.g. "Ġworld"
  int vocab_size() const;                     // the tokenizer's (the model's rows may be padded beyond)
  StreamDecoder stream_decoder(bool skip_special_tokens) const;

  bool has_chat_template() const { return chat_template_ != nullptr; }
  const std::string& chat_template_source() const;  // the template's text (empty: none)
  const std::string& chat_template_error() const { return chat_template_error_; }  // empty: none or usable
  // The messages with the assistant's generation prompt. `extra` holds the template's other
  // variables (tools, chat_template_kwargs); bos_token / eos_token default to the tokenizer's.
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const;

  // The tokenizer's EOS id, when it names one.
  std::optional<int32_t> eos_id() const;

  // Constrained decoding: GBNF text compiled against this tokenizer's vocabulary (special tokens
  // only where the grammar names them by id, <[id]>; the engine's EOS also where the output is complete). The last few grammars are
  // kept with their mask caches, so a repeated schema is not compiled again. GrammarError when
  // the text does not compile.
  std::shared_ptr<CompiledGrammar> compile_grammar(const std::string& gbnf, const GrammarLimits& limits) const;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  mutable std::mutex grammar_mutex_;
  mutable std::shared_ptr<const TokenVocabulary> grammar_vocabulary_;
  mutable std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> grammars_;  // most recent first
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string chat_template_error_;
};

struct EngineOptions {
  SchedulerOptions scheduler;
  int threads = 0;               // model compute threads (0: all cores)
  std::string weights = "auto";  // matmul weights: auto (as stored), f32, bf16, int8, q4
  std::string output_weights = "auto";  // LoadOptions::output_weights
  std::string served_model_name; // empty: the model folder's name (or the repo id given)
};

// One choice to generate. The engine adds its EOS ids (unless ignore_eos), limits sampling to
// the tokenizer's vocabulary and offsets a seed by choice_index, so the n choices of a seeded
// request differ, reproducibly.
struct ChoiceRequest {
  GenerationRequest generation;
  bool ignore_eos = false;
  int choice_index = 0;
};

class Engine {
 public:
  // Loads the tokenizer (next to the model), then the weights, and starts the scheduler.
  Engine(const std::string& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineText& text() const { return text_; }
  const std::string& name() const { return name_; }
  // The "model" values a client may send: the served name, the name given, its path forms.
  const std::vector<std::string>& accepted_names() const { return accepted_names_; }
  const std::filesystem::path& model_path() const;
  int context_length() const;
  int vocab_size() const;  // the model's (rows of the output layer)
  std::size_t kv_capacity_tokens() const;

  // Throws Error when it could never fit, OverloadedError when the queue is full or stopped.
  std::shared_ptr<RequestStream> submit(ChoiceRequest request);
  std::shared_ptr<RequestStream> submit(EmbeddingRequest request);
  // What the model serves: text (a decoder; it embeds too, pooling its hidden states) or only
  // embeddings (an encoder).
  bool generates() const;
  int embedding_dimensions() const;        // the hidden size: the length of every embedding
  int max_embedding_input_tokens() const;  // the longest input an embedding may have
  const EmbeddingPooling& embedding_pooling() const;
  // task(model) on the engine thread between two steps (Scheduler::run_on_model): the model
  // alone, beside the scheduled requests, without loading it again.
  void run_on_model(const std::function<void(Model&)>& task);
  bool idle() const;  // nothing queued or running
  double seconds_since_progress() const;  // of the engine loop (Scheduler::seconds_since_progress)
  SchedulerStats stats() const;
  std::vector<SequenceSnapshot> running_sequences() const;  // the running batch, for a live view
  // Ends every queued and running request with an error event carrying `reason`.
  void shutdown(const std::string& reason);

 private:
  // Initialised in this order: the tokenizer before the weights (see engine.cpp).
  std::filesystem::path path_;
  EngineText text_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<int32_t> eos_ids_;  // config / generation_config, plus the tokenizer's
  std::string name_;
  std::vector<std::string> accepted_names_;
};

}  // namespace inferlab
