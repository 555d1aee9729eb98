// `inferlab perplexity MODEL --file TEXT`: llama-perplexity's method, and KL divergence against a
// saved reference run. The measuring lives in inferlab/bench/perplexity.h.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "inferlab/bench/perplexity.h"

namespace inferlab::cli {

Registrar reg_perplexity([](CLI::App& app) {
  auto o = std::make_shared<bench::PerplexityOptions>();
  auto json_output = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  CLI::App* p = app.add_subcommand("perplexity", "Perplexity of a text (llama-perplexity's method), KL divergence against a reference run");
  p->add_option("model", o->model, "Model folder or HF repo id in the local cache")->required();
  p->add_option("--file,-f", o->file, "The text file")->required();
  p->add_option("--ctx,-c", o->ctx, "Tokens per chunk; the second half of each is scored")->capture_default_str();
  p->add_option("--weights", o->weights, "Matmul weights: auto (as stored), f32, bf16, int8, q4")->capture_default_str();
  p->add_option("--output-weights", o->output_weights, "Output projection (lm_head, or the tied embedding): auto (int8 under --weights q4, like llama-quantize's Q4 mixes; else as --weights), f32, bf16, int8, q4")->capture_default_str();
  p->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->capture_default_str();
  p->add_option("--chunks", o->chunks, "At most this many chunks (-1: all)")->capture_default_str();
  p->add_option("--kl-divergence-base", o->kl_base_out, "Save this run's log-probabilities (the reference) to FILE");
  p->add_option("--kl-divergence", o->kl_base_in, "Compare with the reference saved in FILE: KLD, top-1 agreement, ΔPPL");
  p->add_flag("--json", *json_output, "Print one JSON object");
  p->add_flag("--quiet,-q", *quiet, "No progress lines on stderr");
  p->callback([o, json_output, quiet] {
    if (!*quiet)
      o->on_progress = [](const bench::PerplexityProgress& pr) {
        std::fprintf(stderr, "[%d/%d] PPL %.4f  %.1f s, about %.0f s left\n", pr.chunk, pr.chunks, pr.ppl, pr.seconds,
                     pr.seconds / pr.chunk * (pr.chunks - pr.chunk));
      };
    const bench::PerplexityResult r = bench::compute_perplexity(*o);
    if (*json_output) std::printf("%s\n", bench::perplexity_json(r).dump(2).c_str());
    else std::fputs(bench::perplexity_text(r).c_str(), stdout);
  });
});

}  // namespace inferlab::cli
