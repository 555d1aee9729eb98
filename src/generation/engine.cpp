// Engine: loads a model for serving and owns it with its tokenizer, chat template and scheduler;
// holds the serving policies (tokenizer discovery, EOS union, vocabulary limit, choice seeds,
// served name) so a server never reaches the model, tokenizer or scheduler itself.
#include "inferlab/generation/engine.h"

#include <malloc.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/util/model_path.h"

namespace inferlab {
namespace fs = std::filesystem;

namespace {

// The tokenizer beside the model: its folder, the GGUF file itself, or the folder of a weights file.
std::shared_ptr<const Tokenizer> tokenizer_next_to(const fs::path& path) {
  std::shared_ptr<const Tokenizer> tokenizer;
  if (fs::is_directory(path)) tokenizer = Tokenizer::from_folder(path);
  else if (path.extension() == ".gguf") tokenizer = Tokenizer::from_gguf(path);
  else tokenizer = Tokenizer::from_folder(path.parent_path());
  // The memory the tokenizer's JSON parse used for a moment (~60 MiB for Qwen's) goes back to
  // the system before the weights are allocated, so it never adds to the serving peak.
  malloc_trim(0);
  return tokenizer;
}

}  // namespace

EngineText::EngineText(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {
  if (tokenizer_->chat_template().empty()) return;
  try {
    chat_template_ = std::make_unique<ChatTemplate>(tokenizer_->chat_template());
  } catch (const std::exception& e) {
    chat_template_error_ = e.what();
  }
}

EngineText::~EngineText() = default;

std::vector<int32_t> EngineText::tokenize(std::string_view text, bool add_special_tokens) const {
  return tokenizer_->encode(text, add_special_tokens);
}

std::string EngineText::detokenize(std::span<const int32_t> ids) const { return tokenizer_->decode(ids, false); }

std::string EngineText::token_text(int32_t id) const { return tokenizer_->decode(std::span<const int32_t>(&id, 1), false); }

std::string EngineText::token_bytes(int32_t id) const {
  return tokenizer_->decode_bytes(std::span<const int32_t>(&id, 1), false);
}

std::string EngineText::token_piece(int32_t id) const { return tokenizer_->id_to_piece(id); }

int EngineText::vocab_size() const { return tokenizer_->vocab_size(); }

StreamDecoder EngineText::stream_decoder(bool skip_special_tokens) const { return StreamDecoder(tokenizer_, skip_special_tokens); }

std::string EngineText::render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json variables = extra;
  if (!variables.contains("bos_token")) variables["bos_token"] = tokenizer_->bos_token();
  if (!variables.contains("eos_token")) variables["eos_token"] = tokenizer_->eos_token();
  return chat_template_->render(messages, true, variables);
}

const std::string& EngineText::chat_template_source() const { return tokenizer_->chat_template(); }

std::optional<int32_t> EngineText::eos_id() const {
  if (tokenizer_->eos_token().empty()) return std::nullopt;
  return tokenizer_->piece_to_id(tokenizer_->eos_token());
}

std::shared_ptr<CompiledGrammar> EngineText::compile_grammar(const std::string& gbnf, const GrammarLimits& limits) const {
  constexpr std::size_t kKept = 16;
  {
    std::lock_guard lock(grammar_mutex_);
    for (auto it = grammars_.begin(); it != grammars_.end(); ++it)
      if (it->first == gbnf) {
        grammars_.splice(grammars_.begin(), grammars_, it);
        return it->second;
      }
  }
  Grammar grammar = parse_gbnf(gbnf, limits);  // outside the lock: a big grammar does not hold others up
  std::lock_guard lock(grammar_mutex_);
  if (!grammar_vocabulary_) {
    std::vector<std::string> bytes(tokenizer_->vocab_size());
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id)
      if (!tokenizer_->is_special(id)) bytes[id] = tokenizer_->decode_bytes(std::span<const int32_t>(&id, 1), false);
    grammar_vocabulary_ = std::make_shared<TokenVocabulary>(std::move(bytes));
  }
  auto compiled = std::make_shared<CompiledGrammar>(std::move(grammar), grammar_vocabulary_);
  grammars_.emplace_front(gbnf, compiled);
  if (grammars_.size() > kKept) grammars_.pop_back();
  return compiled;
}

Engine::Engine(const std::string& model, const EngineOptions& options)
    : path_(resolve_model_path(model)), text_(tokenizer_next_to(path_)) {
  LoadOptions load_options;
  load_options.threads = options.threads;
  load_options.weights = options.weights;
  load_options.output_weights = options.output_weights;
  model_ = Model::load(model, load_options);

  const ModelConfig& config = model_->config();
  eos_ids_ = config.eos_token_ids;
  if (auto eos = text_.eos_id(); eos && std::find(eos_ids_.begin(), eos_ids_.end(), *eos) == eos_ids_.end())
    eos_ids_.push_back(*eos);

  // Served name: the option, else the folder's name (or the repo id as given).
  fs::path given(model);
  std::string folder = fs::is_directory(given) || fs::is_regular_file(given) ? fs::weakly_canonical(given).filename().string()
                                                                              : model;
  name_ = options.served_model_name.empty() ? folder : options.served_model_name;
  accepted_names_ = {name_, model, path_.string(), fs::weakly_canonical(path_).string(), folder};

  scheduler_ = std::make_unique<Scheduler>(*model_, options.scheduler);
}

Engine::~Engine() = default;

const fs::path& Engine::model_path() const { return model_->path(); }
int Engine::context_length() const { return model_->config().max_position_embeddings; }
int Engine::vocab_size() const { return model_->config().vocab_size; }
std::size_t Engine::kv_capacity_tokens() const { return scheduler_->capacity_tokens(); }

std::shared_ptr<RequestStream> Engine::submit(ChoiceRequest request) {
  GenerationRequest& generation = request.generation;
  // A padded output layer has rows no token decodes to: never sample them.
  if (text_.vocab_size() < vocab_size()) generation.sampling.vocab_limit = text_.vocab_size();
  if (generation.sampling.seed) *generation.sampling.seed += request.choice_index;
  if (!request.ignore_eos) generation.stop_token_ids.insert(generation.stop_token_ids.end(), eos_ids_.begin(), eos_ids_.end());
  return scheduler_->submit(std::move(generation));
}

std::shared_ptr<RequestStream> Engine::submit(EmbeddingRequest request) { return scheduler_->submit(std::move(request)); }

void Engine::run_on_model(const std::function<void(Model&)>& task) { scheduler_->run_on_model(task); }

bool Engine::generates() const { return !model_->config().encoder; }
int Engine::embedding_dimensions() const { return model_->config().hidden_size; }
int Engine::max_embedding_input_tokens() const { return max_input_tokens(model_->config()); }
const EmbeddingPooling& Engine::embedding_pooling() const { return model_->config().pooling; }

bool Engine::idle() const { return scheduler_->idle(); }
double Engine::seconds_since_progress() const { return scheduler_->seconds_since_progress(); }
SchedulerStats Engine::stats() const { return scheduler_->stats(); }
std::vector<SequenceSnapshot> Engine::running_sequences() const { return scheduler_->running_sequences(); }
void Engine::shutdown(const std::string& reason) { scheduler_->shutdown(reason); }

}  // namespace inferlab
