// `inferlab bench grammar`: what constrained decoding costs on a model's vocabulary. The
// vocabulary's byte trie and a JSON schema's grammar are built and timed; then random sampling
// under the schema times the token mask of every step (the first generation on a fresh grammar:
// cold, every mask computed; the later ones: warm, from the per-state cache); and the engine
// decodes with and without the schema, single sequence, for the decode tokens/s ratio.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab::bench {

struct GrammarBenchOptions {
  std::string model;
  std::string schema_file;  // empty: the built-in nested schema
  int generations = 50;     // random-sampling runs of the mask timing
  int decode_runs = 4;      // engine generations with and without the schema
  int max_tokens = 200;
  int threads = 0;
  uint64_t seed = 1;
};

struct MaskTimes {
  int tokens = 0;
  double median_us = 0, p90_us = 0, p99_us = 0, mean_us = 0;
};

struct GrammarBench {
  GrammarBenchOptions options;
  std::string cpu;
  int vocab_size = 0;
  double vocab_ms = 0;          // token bytes and the byte trie (once per model)
  double compile_ms = 0;        // schema -> GBNF -> byte-level grammar
  std::size_t grammar_bytes = 0;
  double first_mask_ms = 0;     // the first step's mask on a fresh grammar
  MaskTimes cold, warm, all;
  std::size_t parser_states = 0, cached_masks = 0;
  double decode_tps_free = 0, decode_tps_schema = 0;
  int decode_tokens_free = 0, decode_tokens_schema = 0;
};

GrammarBench run_grammar_bench(const GrammarBenchOptions& options);

// `inferlab bench grammar MODEL --cases FILE.json`: the machine-readable side of the comparison with
// xgrammar and llguidance (bench/grammar_peers.sh). FILE is a JSON array of cases
//   {"id": ..., "schema": {...}, "documents": [[token ids], ...], "time_masks": bool}
// and the answer one object per case, in order:
//   {"id", "compiled", "keyword" (the refused keyword, or null), "error", "compile_ms" (schema ->
//    GBNF -> automaton, the vocabulary excluded), "documents": [{"accepted", "mask_us": [...]}]}
// A document is accepted when every token is and the grammar can end there. With time_masks, the
// mask before each token and the one after the last are timed (on a fresh grammar: cold caches).
nlohmann::json run_grammar_cases(const std::string& model, const std::string& cases_file);
std::string grammar_bench_text(const GrammarBench& bench);
nlohmann::json grammar_bench_json(const GrammarBench& bench);

}  // namespace inferlab::bench
