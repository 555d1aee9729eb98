// inferlab._core (see bindings.h): errors, the engine, the tokenizer and the forward pass.
// Every call that reaches the engine or the model runs with the GIL released.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "bindings.h"
#include "inferlab/generation/request_stream.h"
#include "inferlab/hub/pull.h"
#include "inferlab/model/model.h"
#include "inferlab/server/in_process.h"
#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/util/build_info.h"
#include "inferlab/util/error.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace inferlab::python {
namespace {

using ordered_json = nlohmann::ordered_json;

// The library's errors as Python sees them: what a request asked that the server answers with a
// 4xx is a ValueError (its message names the field); everything else the library refuses is an
// inferlab.Error (a RuntimeError) with the CLI's message.
PyObject* error_type = nullptr;

void translate(const std::exception_ptr& thrown, void*) {
  try {
    std::rethrow_exception(thrown);
  } catch (const RequestError& e) {
    // The server's message, led by the field it is about when it does not name it itself.
    std::string message = e.what();
    if (!e.param().empty() && message.find("'" + e.param() + "'") == std::string::npos)
      message = fmt::format("'{}': {}", e.param(), message);
    PyErr_SetString(PyExc_ValueError, message.c_str());
  } catch (const Error& e) {
    PyErr_SetString(error_type, e.what());
  } catch (const nlohmann::json::exception& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

ordered_json parse_json_argument(const std::string& text, const char* name) {
  ordered_json value = ordered_json::parse(text, nullptr, false);
  if (value.is_discarded()) throw RequestError(400, fmt::format("'{}' is not valid JSON", name), name);
  return value;
}

// Tokenizer: the model's own (tokenizer.json, vocab.json + merges.txt, or a GGUF file's), with its
// chat template compiled once.
class PyTokenizer {
 public:
  // A template that does not compile leaves the tokenizer usable, as the engine does; rendering
  // then says why.
  explicit PyTokenizer(const std::string& model) : tokenizer_(Tokenizer::load(model)) {
    if (tokenizer_->chat_template().empty()) return;
    try {
      chat_template_ = std::make_unique<ChatTemplate>(tokenizer_->chat_template());
    } catch (const std::exception& e) {
      chat_template_error_ = e.what();
    }
  }
  std::vector<int32_t> encode(const std::string& text, bool add_special_tokens) const {
    return tokenizer_->encode(text, add_special_tokens);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
    for (int32_t id : ids)
      if (id < 0 || id >= tokenizer_->vocab_size())
        throw RequestError(400, fmt::format("'ids' must hold token ids 0..{}, found {}", tokenizer_->vocab_size() - 1, id), "ids");
    return tokenizer_->decode(ids, skip_special_tokens);
  }
  // messages and extra as JSON text; bos_token / eos_token default to the tokenizer's, as the engine renders.
  std::string render_chat(const std::string& messages, bool add_generation_prompt, const std::string& extra) const {
    if (!chat_template_error_.empty()) fail("the chat template does not compile: {}", chat_template_error_);
    if (!chat_template_) fail("this tokenizer has no chat template");
    ordered_json variables = parse_json_argument(extra, "kwargs");
    if (!variables.contains("bos_token")) variables["bos_token"] = tokenizer_->bos_token();
    if (!variables.contains("eos_token")) variables["eos_token"] = tokenizer_->eos_token();
    return chat_template_->render(parse_json_argument(messages, "conversation"), add_generation_prompt, variables);
  }
  std::optional<int32_t> token_id(const std::string& piece) const {
    if (piece.empty()) return std::nullopt;
    return tokenizer_->piece_to_id(piece);
  }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string chat_template_error_;
};

// A sequence's KV cache for step-by-step forward passes (transformers' past_key_values): its own
// pool of `capacity` positions on the model's backend, made for one engine's model.
class ForwardCache {
 public:
  ForwardCache(Model& model, int capacity, const InProcessServer& owner)
      : capacity_(capacity),
        owner_(&owner),
        cache_(model.config(), static_cast<std::size_t>(capacity), 16, KVType::F32, model.backend()) {}
  ~ForwardCache() { seq_.release(cache_); }
  int length() const { return seq_.length; }
  int capacity() const { return capacity_; }
  const InProcessServer* owner() const { return owner_; }
  KVCache& cache() { return cache_; }
  SequenceKV& seq() { return seq_; }

 private:
  int capacity_;
  const InProcessServer* owner_;
  KVCache cache_;
  SequenceKV seq_;
};

using Logits = nb::ndarray<nb::numpy, float, nb::ndim<2>>;

// The engine's own model, one forward step over given ids (transformers' model(ids,
// past_key_values=...)): each pass runs on the engine thread between two scheduler steps
// (InProcessServer::run_on_model), so the weights are loaded once and no step runs meanwhile.
std::unique_ptr<ForwardCache> new_forward_cache(InProcessServer& server, int capacity) {
  const int context = server.engine().context_length();
  if (capacity < 1 || (context > 0 && capacity > context))
    throw RequestError(400, fmt::format("'cache_tokens' must be 1..{} (the context), got {}", context, capacity), "cache_tokens");
  std::unique_ptr<ForwardCache> made;
  {
    nb::gil_scoped_release unlocked;
    server.run_on_model([&](Model& model) { made = std::make_unique<ForwardCache>(model, capacity, server); });
  }
  return made;
}

// Appends ids to `cache` (none: a fresh sequence that is dropped after) and returns their logits.
Logits forward_pass(InProcessServer& server, const std::vector<int32_t>& ids, ForwardCache* cache) {
  const int vocab = server.engine().vocab_size();
  if (ids.empty()) throw RequestError(400, "'ids' is empty (give at least one token id)", "ids");
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      throw RequestError(400, fmt::format("'ids' must hold token ids 0..{}, found {}", vocab - 1, id), "ids");
  if (cache && cache->owner() != &server)
    throw RequestError(400, "'past_key_values' was made by another LLM's forward: pass back the cache this LLM returned",
                       "past_key_values");
  auto rows = std::make_unique<std::vector<float>>();
  {
    nb::gil_scoped_release unlocked;
    server.run_on_model([&](Model& model) {
      std::optional<ForwardCache> fresh;
      if (!cache) fresh.emplace(model, static_cast<int>(ids.size()), server);
      ForwardCache& c = cache ? *cache : *fresh;
      if (c.length() + static_cast<int>(ids.size()) > c.capacity())
        throw RequestError(400,
                           fmt::format("past_key_values holds {} of its {} positions: {} more ids do not fit (a larger "
                                       "cache_tokens when it is made)",
                                       c.length(), c.capacity(), ids.size()),
                           "ids");
      if (!c.seq().reserve(c.cache(), static_cast<int>(ids.size()))) fail("the forward KV cache is exhausted");
      BatchEntry entry{ids, &c.seq(), EntryOutput::all_logits};
      model.forward_into(std::span<const BatchEntry>(&entry, 1), c.cache(), *rows);
    });
  }
  std::vector<float>* logits = rows.release();
  nb::capsule owner(logits, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return Logits(logits->data(), {ids.size(), static_cast<std::size_t>(vocab)}, owner);
}

ServerOptions server_options(int threads, const std::string& weights, int max_batch, std::size_t kv_tokens,
                             const std::string& kv_type, bool prefix_caching, int max_n,
                             const std::string& chat_template_kwargs) {
  ServerOptions options;
  options.threads = threads;
  options.weights = weights;
  options.scheduler.max_batch = max_batch;
  options.scheduler.kv_tokens = kv_tokens;
  options.scheduler.kv_type = parse_kv_type(kv_type);
  options.scheduler.prefix_caching = prefix_caching;
  options.max_n = max_n;
  options.request_timeout_s = 0;  // a caller in-process interrupts with Ctrl-C
  options.chat_template_kwargs = chat_template_kwargs;
  return options;
}

}  // namespace
}  // namespace inferlab::python

using namespace inferlab;
using namespace inferlab::python;

NB_MODULE(_core, m) {
  m.doc() = "inferlab's C++ core (use the inferlab package, not this module)";
  // An LLM kept in a module global lives until the interpreter ends: not a leak worth a warning.
  nb::set_leak_warnings(false);
  m.attr("__version__") = inferlab_version();
  m.attr("git_commit") = inferlab_git_commit();
  error_type = PyErr_NewExceptionWithDoc("inferlab.Error", "An error the inferlab library reported (the CLI's message).",
                                         PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(error_type);
  nb::register_exception_translator(translate);

  m.def("pull_if_missing", &pull_if_missing, "model"_a, "offline"_a, nb::call_guard<nb::gil_scoped_release>());

  nb::class_<InProcessRequest>(m, "Request")
      .def("poll", [](InProcessRequest& r, int timeout_ms) { return r.poll(std::chrono::milliseconds(timeout_ms)); },
           "timeout_ms"_a, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("done", &InProcessRequest::done)
      .def("cancel", &InProcessRequest::cancel, nb::call_guard<nb::gil_scoped_release>())
      .def("prompt_token_ids", &InProcessRequest::prompt_token_ids);

  nb::class_<ForwardCache>(m, "KVCache")
      .def_prop_ro("length", &ForwardCache::length)
      .def_prop_ro("capacity", &ForwardCache::capacity);

  nb::class_<InProcessServer>(m, "Engine")
      .def(
          "__init__",
          [](InProcessServer* self, const std::string& model, int threads, const std::string& weights, int max_batch,
             std::size_t kv_tokens, const std::string& kv_type, bool prefix_caching, int max_n,
             const std::string& chat_template_kwargs) {
            const ServerOptions options =
                server_options(threads, weights, max_batch, kv_tokens, kv_type, prefix_caching, max_n, chat_template_kwargs);
            new (self) InProcessServer(model, options);
          },
          "model"_a, "threads"_a, "weights"_a, "max_batch"_a, "kv_tokens"_a, "kv_type"_a, "prefix_caching"_a, "max_n"_a,
          "chat_template_kwargs"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("submit", &InProcessServer::submit, "route"_a, "body"_a, nb::keep_alive<0, 1>(),
           nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("name", [](const InProcessServer& s) { return s.engine().name(); })
      .def_prop_ro("model_path", [](const InProcessServer& s) { return s.engine().model_path().string(); })
      .def_prop_ro("context_length", [](const InProcessServer& s) { return s.engine().context_length(); })
      .def_prop_ro("vocab_size", [](const InProcessServer& s) { return s.engine().vocab_size(); })
      .def_prop_ro("kv_capacity_tokens", [](const InProcessServer& s) { return s.engine().kv_capacity_tokens(); })
      .def_prop_ro("has_chat_template", [](const InProcessServer& s) { return s.engine().text().has_chat_template(); })
      .def("new_cache", &new_forward_cache, "capacity"_a, nb::keep_alive<0, 1>())
      .def("forward", &forward_pass, "ids"_a, "cache"_a.none());

  nb::class_<PyTokenizer>(m, "Tokenizer")
      .def(nb::init<const std::string&>(), "model"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("encode", &PyTokenizer::encode, "text"_a, "add_special_tokens"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("decode", &PyTokenizer::decode, "ids"_a, "skip_special_tokens"_a, nb::call_guard<nb::gil_scoped_release>())
      .def("render_chat", &PyTokenizer::render_chat, "messages"_a, "add_generation_prompt"_a, "extra"_a)
      .def("token_id", &PyTokenizer::token_id, "piece"_a)
      .def("id_to_piece", [](const PyTokenizer& t, int32_t id) { return t.tokenizer().id_to_piece(id); }, "id"_a)
      .def_prop_ro("vocab_size", [](const PyTokenizer& t) { return t.tokenizer().vocab_size(); })
      .def_prop_ro("bos_token", [](const PyTokenizer& t) { return t.tokenizer().bos_token(); })
      .def_prop_ro("eos_token", [](const PyTokenizer& t) { return t.tokenizer().eos_token(); })
      .def_prop_ro("chat_template", [](const PyTokenizer& t) { return t.tokenizer().chat_template(); });

  bind_lab(m);
}
