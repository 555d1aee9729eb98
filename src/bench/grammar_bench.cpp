// `inferlab bench grammar` (grammar_bench.h).
#include "inferlab/bench/grammar_bench.h"

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/lab/environment.h"
#include "inferlab/generation/engine.h"
#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/util/model_path.h"
#include "inferlab/util/stats.h"

namespace inferlab::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// An order with nested objects, arrays of objects, enums, formats and optional fields.
const char* kNestedSchema = R"({"type":"object","properties":{
  "id":{"type":"string","format":"uuid"},
  "customer":{"type":"object","properties":{"name":{"type":"string"},"email":{"type":"string","format":"email"},
    "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
      "required":["street","city","zip"],"additionalProperties":false}},"required":["name","address"],"additionalProperties":false},
  "items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"quantity":{"type":"integer","minimum":1},
    "price":{"type":"number"},"tags":{"type":"array","items":{"enum":["new","sale","gift"]},"maxItems":3}},
    "required":["sku","quantity","price"],"additionalProperties":false},"minItems":1,"maxItems":5},
  "status":{"enum":["pending","paid","shipped"]},
  "placed":{"type":"string","format":"date-time"},
  "note":{"anyOf":[{"type":"string"},{"type":"null"}]}
},"required":["id","customer","items","status","placed","note"],"additionalProperties":false})";

MaskTimes summarize(std::vector<double> us) {
  MaskTimes t;
  t.tokens = static_cast<int>(us.size());
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  t.median_us = nearest_rank(us, 0.5);
  t.p90_us = nearest_rank(us, 0.9);
  t.p99_us = nearest_rank(us, 0.99);
  t.mean_us = mean(us);
  return t;
}

}  // namespace

GrammarBench run_grammar_bench(const GrammarBenchOptions& options) {
  GrammarBench b;
  b.options = options;
  b.cpu = lab::host_environment().value("cpu_model", "unknown");
  json schema;
  if (options.schema_file.empty()) {
    schema = json::parse(kNestedSchema);
  } else {
    std::ifstream in(options.schema_file);
    if (!in) fail("cannot read the schema file {}", options.schema_file);
    schema = json::parse(in, nullptr, false);
    if (schema.is_discarded()) fail("{} is not JSON", options.schema_file);
  }

  auto tokenizer = Tokenizer::load(options.model);
  auto t0 = Clock::now();
  std::vector<std::string> bytes(tokenizer->vocab_size());
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id)
    if (!tokenizer->is_special(id)) bytes[id] = tokenizer->decode_bytes(std::span<const int32_t>(&id, 1), false);
  auto vocab = std::make_shared<TokenVocabulary>(std::move(bytes));
  b.vocab_ms = ms_since(t0);
  b.vocab_size = vocab->size();

  t0 = Clock::now();
  const std::string gbnf = json_schema_to_gbnf(schema);
  auto grammar = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), vocab);
  b.compile_ms = ms_since(t0);
  b.grammar_bytes = gbnf.size();

  // Random sampling as tests/grammar/grammar_sampling.cpp does: the whole mask, its one-byte
  // tokens or its tokens with a JSON delimiter, in turn at random, so outputs end.
  std::vector<int32_t> one_byte, delimiters;
  for (int32_t id = 0; id < vocab->size(); ++id) {
    const std::string& s = vocab->bytes(id);
    if (s.size() == 1) one_byte.push_back(id);
    if (!s.empty() && s.find_first_of("\"}],") != std::string::npos) delimiters.push_back(id);
  }
  std::mt19937_64 rng(options.seed);
  std::vector<double> cold, warm;
  TokenMask mask;
  std::vector<int32_t> allowed;
  for (int g = 0; g < options.generations; ++g) {
    GrammarMatcher matcher(grammar);
    for (int step = 0; step < options.max_tokens * 4; ++step) {
      auto m0 = Clock::now();
      matcher.fill_mask(mask);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - m0).count();
      if (g == 0 && step == 0) b.first_mask_ms = us / 1000;
      (g == 0 ? cold : warm).push_back(us);
      allowed.clear();
      const int mode = std::uniform_int_distribution<int>(0, 2)(rng);
      if (mode > 0)
        for (int32_t id : mode == 1 ? one_byte : delimiters)
          if (mask.test(id)) allowed.push_back(id);
      if (allowed.empty()) {
        const auto& words = mask.words();
        for (std::size_t w = 0; w < words.size(); ++w)
          for (uint64_t bits = words[w]; bits; bits &= bits - 1) allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(bits)));
      }
      const std::size_t choices = allowed.size() + (matcher.can_finish() ? 1 : 0);
      if (choices == 0) break;
      const std::size_t pick = std::uniform_int_distribution<std::size_t>(0, choices - 1)(rng);
      if (pick == allowed.size() || !matcher.accept_token(allowed[pick]) || matcher.terminated()) break;
    }
  }
  b.cold = summarize(cold);
  b.warm = summarize(warm);
  std::vector<double> all = cold;
  all.insert(all.end(), warm.begin(), warm.end());
  b.all = summarize(all);
  auto stats = grammar->cache_stats();
  b.parser_states = stats.states;
  b.cached_masks = stats.masks;

  // Decode speed through the engine, one sequence at a time, with and without the schema.
  if (options.decode_runs > 0) {
    EngineOptions engine_options;
    engine_options.threads = options.threads;
    Engine engine(options.model, engine_options);
    auto constrained = engine.text().compile_grammar(gbnf, GrammarLimits{});
    const std::vector<int32_t> prompt = engine.text().tokenize("Write an order as JSON.", false);
    double ms_free = 0, ms_schema = 0;
    for (int run = 0; run < options.decode_runs; ++run)
      for (bool with_schema : {false, true}) {
        ChoiceRequest request;
        request.generation.prompt = prompt;
        request.generation.max_tokens = options.max_tokens;
        request.generation.sampling.seed = options.seed + run;
        request.generation.sampling.temperature = 1.0f;
        if (with_schema) request.generation.grammar = constrained;
        request.ignore_eos = !with_schema;
        auto stream = engine.submit(std::move(request));
        for (bool done = false; !done;)
          for (auto& event : stream->wait(std::chrono::milliseconds(100)))
            if (event.finish) {
              done = true;
              if (*event.finish != FinishReason::stop && *event.finish != FinishReason::length) fail("generation failed: {}", event.error);
              // Decode time: after the first token, so prefill is not counted.
              (with_schema ? ms_schema : ms_free) += event.timings->decode_ms;
              (with_schema ? b.decode_tokens_schema : b.decode_tokens_free) += event.timings->generated_tokens - 1;
            }
      }
    b.decode_tps_free = ms_free > 0 ? b.decode_tokens_free * 1000.0 / ms_free : 0;
    b.decode_tps_schema = ms_schema > 0 ? b.decode_tokens_schema * 1000.0 / ms_schema : 0;
  }
  return b;
}

json run_grammar_cases(const std::string& model, const std::string& cases_file) {
  std::ifstream in(cases_file);
  if (!in) fail("cannot read the cases file {}", cases_file);
  const json cases = json::parse(in, nullptr, false);
  if (cases.is_discarded() || !cases.is_array()) fail("{} is not a JSON array of cases", cases_file);

  auto tokenizer = Tokenizer::load(model);
  std::vector<std::string> bytes(tokenizer->vocab_size());
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id)
    if (!tokenizer->is_special(id)) bytes[id] = tokenizer->decode_bytes(std::span<const int32_t>(&id, 1), false);
  auto vocab = std::make_shared<TokenVocabulary>(std::move(bytes));

  json out = json::array();
  TokenMask mask;
  for (const json& c : cases) {
    json result = {{"id", c.value("id", json())}, {"compiled", false}, {"keyword", nullptr}, {"error", nullptr}};
    std::shared_ptr<CompiledGrammar> grammar;
    auto t0 = Clock::now();
    try {
      grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(c.at("schema"))), vocab);
      result["compile_ms"] = ms_since(t0);
      result["compiled"] = true;
    } catch (const UnsupportedSchemaError& e) {
      result["keyword"] = e.keyword();
      result["error"] = e.what();
    } catch (const std::exception& e) {
      result["error"] = e.what();
    }
    json documents = json::array();
    const bool time_masks = c.value("time_masks", false);
    if (grammar)
      for (const json& document : c.value("documents", json::array())) {
        GrammarMatcher matcher(grammar);
        bool accepted = true;
        std::vector<double> mask_us;
        auto timed_mask = [&] {
          auto m0 = Clock::now();
          matcher.fill_mask(mask);
          mask_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - m0).count());
        };
        for (const json& token : document) {
          if (time_masks) timed_mask();
          const int32_t id = token.get<int32_t>();
          if (id < 0 || id >= vocab->size() || !matcher.accept_token(id)) {
            accepted = false;
            break;
          }
        }
        accepted = accepted && matcher.can_finish();
        if (time_masks && accepted) timed_mask();
        json d = {{"accepted", accepted}};
        if (time_masks) d["mask_us"] = mask_us;
        documents.push_back(std::move(d));
      }
    result["documents"] = std::move(documents);
    out.push_back(std::move(result));
  }
  return out;
}

std::string grammar_bench_text(const GrammarBench& b) {
  auto row = [](const char* name, const MaskTimes& t) {
    return fmt::format("  {:<6} {:>7} tokens  median {:>8.2f} us  p90 {:>8.2f} us  p99 {:>9.2f} us  mean {:>8.2f} us\n", name, t.tokens,
                       t.median_us, t.p90_us, t.p99_us, t.mean_us);
  };
  std::string out = fmt::format("grammar bench: {} ({} tokens), CPU {}\n", b.options.model, b.vocab_size, b.cpu);
  out += fmt::format("vocabulary trie {:.1f} ms; schema -> grammar {:.2f} ms ({} bytes of GBNF); first mask {:.2f} ms\n", b.vocab_ms,
                     b.compile_ms, b.grammar_bytes, b.first_mask_ms);
  out += fmt::format("mask per token over {} random generations ({} parser states, {} masks cached):\n", b.options.generations,
                     b.parser_states, b.cached_masks);
  out += row("cold", b.cold) + row("warm", b.warm) + row("all", b.all);
  if (b.decode_tps_free > 0)
    out += fmt::format("decode, one sequence: {:.1f} tok/s free ({} tokens), {:.1f} tok/s under the schema ({} tokens): {:.2f}x\n",
                       b.decode_tps_free, b.decode_tokens_free, b.decode_tps_schema, b.decode_tokens_schema,
                       b.decode_tps_schema / b.decode_tps_free);
  return out;
}

json grammar_bench_json(const GrammarBench& b) {
  auto times = [](const MaskTimes& t) {
    return json{{"tokens", t.tokens}, {"median_us", t.median_us}, {"p90_us", t.p90_us}, {"p99_us", t.p99_us}, {"mean_us", t.mean_us}};
  };
  return {{"model", b.options.model}, {"cpu", b.cpu}, {"vocab_size", b.vocab_size}, {"vocab_ms", b.vocab_ms},
          {"compile_ms", b.compile_ms}, {"grammar_bytes", b.grammar_bytes}, {"first_mask_ms", b.first_mask_ms},
          {"mask_cold", times(b.cold)}, {"mask_warm", times(b.warm)}, {"mask_all", times(b.all)},
          {"parser_states", b.parser_states}, {"cached_masks", b.cached_masks},
          {"decode_tps_free", b.decode_tps_free}, {"decode_tps_schema", b.decode_tps_schema},
          {"decode_tokens_free", b.decode_tokens_free}, {"decode_tokens_schema", b.decode_tokens_schema},
          {"decode_ratio", b.decode_tps_free > 0 ? b.decode_tps_schema / b.decode_tps_free : 0.0}};
}

}  // namespace inferlab::bench
