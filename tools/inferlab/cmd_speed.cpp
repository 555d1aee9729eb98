// Speed commands: `bench probes` (the machine's limits), `bench kernels` (each matmul kernel on the
// Qwen2.5-0.5B shapes beside those limits), `bench engine` (llama-bench-style pp / tg tokens/s) and
// `bench accuracy` (each weight format against f32). The measuring lives in inferlab/bench/.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "inferlab/bench/accuracy.h"
#include "inferlab/bench/engine_bench.h"
#include "inferlab/bench/grammar_bench.h"
#include "inferlab/bench/kernel_bench.h"
#include "inferlab/bench/probes.h"
#include "inferlab/hub/pull.h"

namespace inferlab::cli {
namespace {

using namespace inferlab::bench;

void print_or_json(bool as_json, const nlohmann::json& doc, const std::string& text) {
  if (as_json) std::printf("%s\n", doc.dump(2).c_str());
  else std::fputs(text.c_str(), stdout);
}

struct ProbesArgs {
  int threads = 0;
  bool json_output = false, quick = false;
};

}  // namespace

Registrar reg_speed([](CLI::App& app) {
  CLI::App& bench = command_group(app, "bench", "Benchmarks and measurements");

  auto probes = std::make_shared<ProbesArgs>();
  CLI::App* p = bench.add_subcommand("probes", "The machine's limits: memory bandwidth, OpenBLAS sgemm, bf16/fp32/int8 peaks");
  p->add_option("--threads,-t", probes->threads, "Threads (0: all cores)")->capture_default_str();
  p->add_flag("--json", probes->json_output, "Print one JSON object");
  p->add_flag("--quick", probes->quick, "Shorter timing (noisier); the read array stays 4x the L3, at least 1 GiB");
  p->callback([probes] {
    const MachineProbes result = run_probes(probes->threads, probes->quick);
    print_or_json(probes->json_output, probes_json(result), probes_text(result));
  });

  auto engine = std::make_shared<EngineBenchOptions>();
  auto engine_json = std::make_shared<bool>(false);
  auto engine_offline = std::make_shared<bool>(false);
  CLI::App* e = bench.add_subcommand("engine", "llama-bench style: prompt processing (pp) and generation (tg) tokens/s, peak RSS");
  e->add_option("model", engine->model, "Model folder or HF repo id (pulled into the cache when missing)")->required();
  e->add_flag("--offline", *engine_offline, "Never download: a repo id must already be in the Hugging Face cache (as HF_HUB_OFFLINE=1)");
  e->add_option("-p,--n-prompt", engine->prompt, "Prompt tokens processed in one forward (0: skip pp)")->capture_default_str();
  e->add_option("-n,--n-gen", engine->gen, "Tokens generated one at a time (0: skip tg)")->capture_default_str();
  add_kv_type_option(*e, engine->kv_type);
  e->add_option("-d,--n-depth", engine->depths,
                "Positions already in the KV cache when each pp / tg run starts (filled untimed): decode at a long "
                "context; a list (-d 0,8192,32768) gives the tests at each")
      ->delimiter(',')
      ->capture_default_str();
  e->add_option("-t,--threads", engine->threads, "Threads (0: all cores)")->capture_default_str();
  e->add_option("-r,--repetitions", engine->repeats, "Measured runs per test (after one warm-up)")->capture_default_str();
  e->add_option("--weights,--dtype", engine->weights, "Matmul weights: auto (as stored), f32, bf16, int8, q4")->capture_default_str();
  e->add_option("--output-weights", engine->output_weights, "Output projection (lm_head, or the tied embedding): auto (int8 under --weights q4, like llama-quantize's Q4 mixes; else as --weights), f32, bf16, int8, q4")->capture_default_str();
  e->add_option("--kld-text", engine->quality_text, "Also measure the format's KL divergence from f32 on this text")
      ->check(CLI::ExistingFile);
  e->add_flag("--bandwidth", engine->bandwidth,
              "Measure the memory read bandwidth around each tg repetition and print decode's share of it");
  e->add_option("--kld-ctx", engine->quality_ctx, "Context of the KL measurement (tokens per chunk)")->capture_default_str();
  e->add_option("--kld-chunks", engine->quality_chunks, "Chunks of the KL measurement")->capture_default_str();
  e->add_flag("--json", *engine_json, "Print one JSON object");
  e->callback([engine, engine_json, engine_offline] {
    pull_if_missing(engine->model, *engine_offline);
    const EngineBench result = run_engine_bench(*engine);
    print_or_json(*engine_json, engine_bench_json(result), engine_bench_text(result));
  });

  auto grammar = std::make_shared<GrammarBenchOptions>();
  auto grammar_json = std::make_shared<bool>(false);
  CLI::App* g = bench.add_subcommand("grammar", "Constrained decoding: mask cost per token, compile time, decode tok/s with vs without a schema");
  g->add_option("model", grammar->model, "Model folder or HF repo id in the local cache")->required();
  g->add_option("--schema", grammar->schema_file, "A JSON Schema file (default: a built-in nested order schema)");
  g->add_option("--generations", grammar->generations, "Random-sampling runs timing the mask")->capture_default_str()->check(CLI::Range(1, 100000));
  g->add_option("--decode-runs", grammar->decode_runs, "Engine generations with and without the schema (0: skip)")->capture_default_str()->check(CLI::Range(0, 1000));
  g->add_option("--max-tokens", grammar->max_tokens, "Tokens per engine generation")->capture_default_str()->check(CLI::Range(2, 100000));
  g->add_option("-t,--threads", grammar->threads, "Threads (0: all cores)")->capture_default_str();
  g->add_option("--seed", grammar->seed, "Sampling seed")->capture_default_str();
  g->add_flag("--json", *grammar_json, "Print one JSON object");
  auto grammar_cases = std::make_shared<std::string>();
  g->add_option("--cases", *grammar_cases,
                "Replay mode (bench/grammar_peers.sh): a JSON array of {id, schema, documents: [[token ids]], time_masks}; "
                "prints per case whether it compiled, compile ms, each document's verdict and mask times, as JSON")
      ->check(CLI::ExistingFile);
  g->callback([grammar, grammar_json, grammar_cases] {
    if (!grammar_cases->empty()) {
      std::printf("%s\n", run_grammar_cases(grammar->model, *grammar_cases).dump().c_str());
      return;
    }
    const GrammarBench result = run_grammar_bench(*grammar);
    print_or_json(*grammar_json, grammar_bench_json(result), grammar_bench_text(result));
  });

  auto accuracy = std::make_shared<AccuracyOptions>();
  auto accuracy_json_output = std::make_shared<bool>(false);
  CLI::App* a = bench.add_subcommand("accuracy", "What each weight format costs: logits and greedy tokens against f32");
  a->add_option("model", accuracy->model, "Model folder, llama2.c .bin, or HF repo id in the local cache")->required();
  a->add_option("--weights", accuracy->formats, "Formats to compare with f32")->delimiter(',')->capture_default_str();
  a->add_option("--prompt-len", accuracy->prompt_len, "Random prompt positions compared")->capture_default_str();
  a->add_option("--steps", accuracy->steps, "Greedy steps compared")->capture_default_str();
  a->add_option("--seed", accuracy->seed, "Seed of the random prompt")->capture_default_str();
  a->add_option("-t,--threads", accuracy->threads, "Threads (0: all cores)")->capture_default_str();
  a->add_flag("--json", *accuracy_json_output, "Print one JSON object");
  a->callback([accuracy, accuracy_json_output] {
    const AccuracyReport report = measure_accuracy(*accuracy);
    print_or_json(*accuracy_json_output, accuracy_json(report), accuracy_text(report));
  });

  auto kernels = std::make_shared<KernelBenchOptions>();
  auto kernels_json = std::make_shared<bool>(false);
  CLI::App* k = bench.add_subcommand("kernels", "Matmul kernels on the Qwen2.5-0.5B shapes: GB/s and GFLOP/s beside the probes");
  k->add_option("--threads,-t", kernels->threads, "Threads (0: all cores)")->capture_default_str();
  k->add_option("--weights", kernels->formats, "Weight formats: bf16, int8, q4")->delimiter(',')->capture_default_str();
  k->add_option("--rows", kernels->rows, "Decode batch sizes (rows of activations)")->delimiter(',')->capture_default_str();
  k->add_option("--shapes", kernels->shapes, "Only these shapes: qkv, q, kv, o, gate_up, down, lm_head")->delimiter(',');
  k->add_option("--prefill-rows", kernels->prefill_rows, "Rows for the prefill GEMM case (0: skip)")->capture_default_str();
  k->add_option("--rotation-mib", kernels->rotation_mib,
                "Decode cases cycle through copies of each matrix adding up to this many MiB (well above the L3, or it serves part of the reads)")
      ->capture_default_str();
  k->add_flag("--json", *kernels_json, "Print one JSON object");
  k->add_flag("--quick", kernels->quick, "Skip lm_head, shorter timing (noisier)");
  k->callback([kernels, kernels_json] {
    const KernelBench result = run_kernel_bench(*kernels);
    print_or_json(*kernels_json, kernel_bench_json(result), kernel_bench_text(result));
  });
});

}  // namespace inferlab::cli
