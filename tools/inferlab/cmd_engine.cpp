// Engine commands: generate (greedy, with/without KV cache), kv-size, make-model.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "inferlab/util/error.h"
#include "inferlab/generation/greedy_decode.h"
#include "inferlab/hub/pull.h"
#include "inferlab/model/model.h"
#include "inferlab/loading/json_config.h"
#include "inferlab/model/make_model.h"
#include "inferlab/loading/safetensors.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab::cli {
namespace {

std::vector<int32_t> parse_id_list(const std::string& text, const char* flag) {
  const std::vector<long> values = parse_int_list(text, 0, INT32_MAX, flag, "a token id");
  std::vector<int32_t> ids(values.begin(), values.end());
  if (ids.empty()) fail("{}: no token ids given", flag);
  return ids;
}

std::string join(const std::vector<int32_t>& ids, const char* sep = ",") {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// 131072 -> "131,072"
std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string mib_text(uint64_t bytes) {
  if (bytes % (1u << 20) == 0) return with_commas(bytes >> 20);
  const double mib = static_cast<double>(bytes) / (1 << 20);
  return with_commas(static_cast<uint64_t>(mib)) + fmt::format("{:.2f}", mib - static_cast<uint64_t>(mib)).substr(1);
}

struct GenerateArgs {
  std::string model;
  std::string weights = "auto";
  std::string output_weights = "auto";
  std::string prompt_ids;
  std::string prompt;
  int max_new_tokens = 32;
  bool no_cache = false, trace = false, verify_cache = false, ignore_eos = false, json_output = false;
  bool offline = false;
  int threads = 0;
  std::string dump_logits;
  SpeculativeOptions speculative;
  KVType kv_type = KVType::F32;
};

void run_generate(const GenerateArgs& args) {
  if (args.max_new_tokens < 0) fail("--max-new-tokens must be >= 0");
  if (args.prompt_ids.empty() == args.prompt.empty()) fail("give exactly one of --prompt-ids or --prompt");
  pull_if_missing(args.model, args.offline);
  LoadOptions load_options;
  load_options.threads = args.threads;
  load_options.weights = args.weights;
  load_options.output_weights = args.output_weights;
  auto model = Model::load(args.model, load_options);
  // The model folder's tokenizer, when it has one (a llama2.c .bin or a bare checkpoint has none);
  // a GGUF file carries its own.
  std::shared_ptr<const Tokenizer> tokenizer;
  const fs::path folder = model->path();
  if (folder.extension() == ".gguf") tokenizer = Tokenizer::from_gguf(folder);
  else if (fs::is_directory(folder) && (fs::exists(folder / "tokenizer.json") || fs::exists(folder / "vocab.json")))
    tokenizer = Tokenizer::from_folder(folder);
  std::vector<int32_t> prompt;
  if (!args.prompt.empty()) {
    if (!tokenizer)
      fail("--prompt needs a tokenizer (tokenizer.json, or vocab.json + merges.txt) in {}; use --prompt-ids",
           folder.string());
    prompt = tokenizer->encode(args.prompt, true);
    if (prompt.empty()) fail("--prompt: the text encodes to no tokens");
  } else {
    prompt = parse_id_list(args.prompt_ids, "--prompt-ids");
  }

  std::ofstream dump;
  if (!args.dump_logits.empty()) {
    dump.open(args.dump_logits, std::ios::binary);
    if (!dump) fail("cannot write {}", args.dump_logits);
    // Every prompt position first (one forward pass), then each generation step's row.
    std::vector<float> rows = prompt_logits(*model, prompt);
    dump.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
  }

  GenerateOptions options;
  options.max_new_tokens = args.max_new_tokens;
  options.use_cache = !args.no_cache;
  options.ignore_eos = args.ignore_eos;
  options.speculative = args.speculative;
  options.kv_type = args.kv_type;
  if (dump.is_open())
    options.on_step_logits = [&](std::span<const float> row) {
      dump.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(row.size() * sizeof(float)));
    };
  // Prefill ends with the first token; decode is the rest (tokens/s as llama.cpp's tools count it).
  using SteadyClock = std::chrono::steady_clock;
  const auto started = SteadyClock::now();
  std::optional<SteadyClock::time_point> first_token;
  options.on_token = [&](int32_t) {
    if (!first_token) first_token = SteadyClock::now();
  };
  GenerateResult result = generate_greedy(*model, prompt, options);
  const auto ended = SteadyClock::now();
  auto ms = [](SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  const double generation_ms = ms(ended - started);
  const double prefill_ms = first_token ? ms(*first_token - started) : generation_ms;
  const double decode_ms = generation_ms - prefill_ms;
  const std::size_t decoded = result.tokens.empty() ? 0 : result.tokens.size() - 1;
  options.on_step_logits = nullptr;
  options.on_token = nullptr;

  // --verify-cache: the same tokens without the cache; under --speculative, without speculation.
  std::optional<GenerateResult> other;
  const bool speculative = args.speculative.enabled();
  if (args.verify_cache) {
    if (speculative) options.speculative.method = "off";
    else options.use_cache = !options.use_cache;
    other = generate_greedy(*model, prompt, options);
  }

  // A model's embedding is often padded past the tokenizer (Qwen2.5: 151936 rows, 151665 pieces);
  // greedy may pick such an id. Like transformers' decode, the text leaves it out, and says so.
  std::string text;
  if (tokenizer) {
    std::vector<int32_t> known, unknown;
    for (int32_t id : result.tokens) (id < tokenizer->vocab_size() ? known : unknown).push_back(id);
    text = tokenizer->decode(known);
    if (!unknown.empty())
      std::fprintf(stderr, "note: id%s %s %s no piece in the tokenizer (%d pieces; the model has %d rows): left out of the text\n",
                   unknown.size() == 1 ? "" : "s", join(unknown).c_str(), unknown.size() == 1 ? "has" : "have",
                   tokenizer->vocab_size(), model->config().vocab_size);
  }

  if (args.json_output) {
    json out = {{"prompt_ids", prompt},
                {"tokens", result.tokens},
                {"positions_fed", result.positions_fed},
                {"finish_reason", result.finish_reason},
                {"use_cache", !args.no_cache},
                {"forward_passes", result.forward_passes},
                {"generation_ms", generation_ms},
                {"prefill_ms", prefill_ms},
                {"decode_ms", decode_ms},
                {"decode_tokens_per_second", decode_ms > 0 ? 1000.0 * static_cast<double>(decoded) / decode_ms : 0.0}};
    if (speculative) {
      out["speculative"] = {{"method", args.speculative.method},
                            {"drafted_tokens", result.drafted_tokens},
                            {"accepted_tokens", result.accepted_tokens}};
      if (other) out["identical_with_and_without_speculative"] = other->tokens == result.tokens;
    } else if (other) {
      out["identical_with_and_without_cache"] = other->tokens == result.tokens;
    }
    if (tokenizer) out["text"] = text;
    std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    std::printf("prompt ids: %s\n", join(prompt).c_str());
    std::printf("generated ids: %s\n", join(result.tokens).c_str());
    if (tokenizer) std::printf("text: %s\n", text.c_str());
    std::printf("finish_reason: %s\n", result.finish_reason.c_str());
    // Under --speculative only: timings vary run to run, and course pages compare generate's output.
    if (speculative) {
      std::printf("%zu tokens in %d forward passes: prefill %.1f ms, decode %.1f ms (%.1f tokens/s after the first)\n",
                  result.tokens.size(), result.forward_passes, prefill_ms, decode_ms,
                  decode_ms > 0 ? 1000.0 * static_cast<double>(decoded) / decode_ms : 0.0);
      std::printf("speculative (%s): %d drafted, %d accepted (%.0f %%)\n", args.speculative.method.c_str(),
                  result.drafted_tokens, result.accepted_tokens,
                  result.drafted_tokens ? 100.0 * result.accepted_tokens / result.drafted_tokens : 0.0);
    }
    if (args.trace) {
      for (std::size_t i = 0; i < result.positions_fed.size(); ++i)
        std::printf("step %zu: %d position%s\n", i + 1, result.positions_fed[i], result.positions_fed[i] == 1 ? "" : "s");
      if (!other)
        std::printf("input lengths per step (%s): [%s]\n", args.no_cache ? "no cache" : "KV cache",
                    join_ints(result.positions_fed).c_str());
    }
    if (other && speculative) {
      std::printf("without speculative: %s\n", join(other->tokens).c_str());
      std::printf("identical: %s\n", other->tokens == result.tokens ? "yes" : "no");
    } else if (other) {
      const GenerateResult& cached = args.no_cache ? *other : result;
      const GenerateResult& uncached = args.no_cache ? result : *other;
      std::printf("with cache:    %s\n", join(cached.tokens).c_str());
      std::printf("without cache: %s\n", join(uncached.tokens).c_str());
      if (args.trace) {
        std::printf("input lengths per step (KV cache): [%s]\n", join_ints(cached.positions_fed).c_str());
        std::printf("input lengths per step (no cache): [%s]\n", join_ints(uncached.positions_fed).c_str());
      }
      std::printf("identical: %s\n", cached.tokens == uncached.tokens ? "yes" : "no");
    }
  }
  std::fflush(stdout);
  if (other && other->tokens != result.tokens) {
    std::fprintf(stderr, "error: tokens with and without %s differ\n", speculative ? "speculative decoding" : "the KV cache");
    throw CLI::RuntimeError(1);
  }
}

struct KvSizeArgs {
  std::string model;
  int layers = 0, kv_heads = 0, head_dim = 0;
  std::string dtype = "bf16";
  std::string tokens = "4096,32768";
};

void run_kv_size(const KvSizeArgs& args) {
  int layers = args.layers, kv_heads = args.kv_heads, head_dim = args.head_dim;
  if (!args.model.empty()) {
    if (layers || kv_heads || head_dim) fail("give either MODEL or --layers/--kv-heads/--head-dim, not both");
    ModelConfig config = read_model_config(args.model);
    layers = config.num_layers, kv_heads = config.num_kv_heads, head_dim = config.head_dim;
    std::printf("%s: %d layers, %d kv heads, head_dim %d, %s\n", args.model.c_str(), layers, kv_heads, head_dim,
                args.dtype.c_str());
  } else if (layers <= 0 || kv_heads <= 0 || head_dim <= 0) {
    fail("give MODEL, or all of --layers, --kv-heads and --head-dim (> 0)");
  }
  const std::size_t element = kv_dtype_bytes(args.dtype);
  if (element == 0) fail("--dtype '{}' is not one of f32, bf16, f16, fp8, int8", args.dtype);
  const uint64_t per_token = kv_bytes_per_token(layers, kv_heads, head_dim, element);
  std::printf("%s bytes / token\n", with_commas(per_token).c_str());
  for (int32_t t : parse_id_list(args.tokens, "--tokens"))
    std::printf("%s tokens: %s MiB\n", with_commas(t).c_str(), mib_text(per_token * static_cast<uint64_t>(t)).c_str());
}

struct MakeModelArgs {
  std::string config, preset, out, dtype = "f32", tokenizer;
  uint64_t seed = 0;
  int layers = 0;  // > 0: num_hidden_layers overridden (a real shape with fewer layers)
};

void run_make_model(const MakeModelArgs& args) {
  if (args.config.empty() == args.preset.empty()) fail("give exactly one of --config or --preset");
  MakeModelOptions options;
  auto dtype = parse_dtype(args.dtype);
  if (!dtype) fail("--dtype '{}' is not one of f32, bf16, f16", args.dtype);
  options.dtype = *dtype;
  options.seed = args.seed;
  if (!args.tokenizer.empty()) options.tokenizer_dir = fs::path(args.tokenizer);
  json config;
  if (!args.preset.empty()) {
    auto [preset_config, generation] = model_preset(args.preset);
    config = preset_config;
    options.generation_config = std::make_shared<const json>(std::move(generation));
  } else {
    fs::path file = args.config;
    if (fs::is_directory(file)) file /= "config.json";
    config = read_json_file(file);
    if (fs::exists(file.parent_path() / "generation_config.json") && !options.tokenizer_dir)
      options.generation_config = std::make_shared<const json>(read_json_file(file.parent_path() / "generation_config.json"));
  }
  if (args.layers > 0) config["num_hidden_layers"] = args.layers;
  write_random_model(config, args.out, options);
  std::printf("wrote %s (%s, %s, seed %llu)\n", args.out.c_str(), config.value("model_type", std::string("?")).c_str(),
              dtype_name(options.dtype), static_cast<unsigned long long>(args.seed));
}

Registrar reg([](CLI::App& app) {
  auto gen = std::make_shared<GenerateArgs>();
  CLI::App* g = app.add_subcommand("generate", "Greedy generation from a model (with or without the KV cache)");
  g->add_option("model", gen->model, "Model folder, llama2.c .bin, or HF repo id (pulled into the cache when missing)")->required();
  g->add_flag("--offline", gen->offline, "Never download: a repo id must already be in the Hugging Face cache (as HF_HUB_OFFLINE=1)");
  g->add_option("--prompt-ids", gen->prompt_ids, "Comma-separated prompt token ids, e.g. 1,2,3");
  g->add_option("--prompt", gen->prompt, "Prompt text (needs the model's tokenizer)");
  g->add_option("--max-new-tokens", gen->max_new_tokens, "Tokens to generate (stops earlier at an eos id)")->capture_default_str();
  g->add_flag("--no-cache", gen->no_cache, "Recompute the whole sequence every step (use_cache=False)");
  g->add_flag("--trace", gen->trace, "Print the number of input positions fed at each step");
  g->add_flag("--verify-cache", gen->verify_cache,
              "Run with and without the cache (under --speculative: with and without speculation); fail unless the tokens are identical");
  g->add_flag("--ignore-eos", gen->ignore_eos, "Do not stop at eos ids");
  g->add_flag("--json", gen->json_output, "Print the result as one JSON object");
  g->add_option("--threads,-t", gen->threads, "Threads (0: all cores)");
  g->add_option("--weights,--dtype", gen->weights, "Matmul weights: auto (as stored), f32, bf16, int8, q4")->capture_default_str();
  g->add_option("--output-weights", gen->output_weights, "Output projection (lm_head, or the tied embedding): auto (int8 under --weights q4, like llama-quantize's Q4 mixes; else as --weights), f32, bf16, int8, q4")->capture_default_str();
  g->add_option("--dump-logits", gen->dump_logits,
                "Write float32 logits: every prompt position, then each step's row ([rows][vocab], raw little-endian)");
  add_speculative_options(*g, gen->speculative);
  add_kv_type_option(*g, gen->kv_type);
  g->callback([gen] { run_generate(*gen); });

  auto kv = std::make_shared<KvSizeArgs>();
  CLI::App* k = app.add_subcommand("kv-size", "KV cache bytes per token and for given context lengths");
  k->add_option("model", kv->model, "Model folder or config.json (instead of the shape flags)");
  k->add_option("--layers", kv->layers, "Transformer layers");
  k->add_option("--kv-heads", kv->kv_heads, "Key/value heads");
  k->add_option("--head-dim", kv->head_dim, "Head dimension");
  k->add_option("--dtype", kv->dtype, "Element type: f32, bf16, f16, fp8/int8")->capture_default_str();
  k->add_option("--tokens", kv->tokens, "Comma-separated token counts")->capture_default_str();
  k->callback([kv] { run_kv_size(*kv); });

  auto mm = std::make_shared<MakeModelArgs>();
  CLI::App* m = app.add_subcommand("make-model", "Write a random-weight model in the HF safetensors layout");
  m->add_option("--config", mm->config, "config.json (or its folder) of the architecture to build");
  std::string presets;
  for (const auto& n : model_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  m->add_option("--preset", mm->preset, "A built-in config: " + presets);
  m->add_option("--out", mm->out, "Output folder")->required();
  m->add_option("--dtype", mm->dtype, "Stored dtype: f32, bf16, f16")->capture_default_str();
  m->add_option("--seed", mm->seed, "Random seed (same seed, same weights)")->capture_default_str();
  m->add_option("--tokenizer", mm->tokenizer, "Folder whose tokenizer files are copied into the model");
  m->add_option("--layers", mm->layers, "Override num_hidden_layers (e.g. a qwen3-30b-a3b shape with fewer layers)")
      ->check(CLI::PositiveNumber);
  m->callback([mm] { run_make_model(*mm); });
});

}  // namespace
}  // namespace inferlab::cli
