// The reference side of tests/generation/sampler_vs_llama_cpp.sh: llama.cpp's own typical, XTC,
// DRY samplers (and its default chain order top-k, typical, top-p, min-p, XTC) applied through
// libllama's C API to the cases of sampler_reference_cases.h. Compiled against node-llama-cpp's
// prebuilt libraries; prints, per case, what is left:
//   alphabet N id...                       (first line: the DRY alphabet, from llama.cpp's tokenizer)
//   case I dist K id p ... | case I logits K id logit ...   (DRY: the logits it changed)
//
//   llama_cpp_samplers MODEL.gguf CASES
#include <llama.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sampler_reference_cases.h"

using sampler_cases::Case;
using sampler_cases::Kind;

static void print_distribution(int index, const llama_token_data_array& cur) {
  // Probabilities of what is left, from its logits (filters shrink the array or set -inf).
  double max = -INFINITY;
  for (size_t i = 0; i < cur.size; ++i) max = std::fmax(max, cur.data[i].logit);
  double sum = 0.0;
  for (size_t i = 0; i < cur.size; ++i) sum += std::exp(static_cast<double>(cur.data[i].logit) - max);
  std::vector<std::pair<int32_t, double>> kept;
  for (size_t i = 0; i < cur.size; ++i) {
    const double p = std::exp(static_cast<double>(cur.data[i].logit) - max) / sum;
    if (p > 0.0) kept.push_back({cur.data[i].id, p});
  }
  std::printf("case %d dist %zu", index, kept.size());
  for (auto& [id, p] : kept) std::printf(" %d %.12g", id, p);
  std::printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: llama_cpp_samplers MODEL.gguf CASES\n");
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  const char* text = sampler_cases::alphabet_text();
  std::vector<llama_token> alphabet(256);
  const int n = llama_tokenize(vocab, text, static_cast<int32_t>(std::strlen(text)), alphabet.data(), 256, false, false);
  if (n <= 0) return 1;
  alphabet.resize(static_cast<size_t>(n));
  std::printf("alphabet %d", n);
  for (llama_token id : alphabet) std::printf(" %d", id);
  std::printf("\n");

  const int cases = std::atoi(argv[2]);
  for (int index = 0; index < cases; ++index) {
    const Case c = sampler_cases::make_case(index, alphabet, n_vocab);
    std::vector<llama_token_data> data(c.logits.size());
    for (size_t i = 0; i < data.size(); ++i) data[i] = {static_cast<llama_token>(i), c.logits[i], 0.0f};
    llama_token_data_array cur = {data.data(), data.size(), -1, false};
    llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    // min_keep 0 everywhere, as llama-server's default.
    switch (c.kind) {
      case Kind::typical:
        llama_sampler_chain_add(chain, llama_sampler_init_typical(c.typical_p, 0));
        break;
      case Kind::xtc:
        llama_sampler_chain_add(chain, llama_sampler_init_xtc(c.xtc_probability, c.xtc_threshold, 0, 1234));
        break;
      case Kind::chain:
        llama_sampler_chain_add(chain, llama_sampler_init_top_k(c.top_k));
        llama_sampler_chain_add(chain, llama_sampler_init_typical(c.typical_p, 0));
        llama_sampler_chain_add(chain, llama_sampler_init_top_p(c.top_p, 0));
        llama_sampler_chain_add(chain, llama_sampler_init_min_p(c.min_p, 0));
        llama_sampler_chain_add(chain, llama_sampler_init_xtc(c.xtc_probability, c.xtc_threshold, 0, 1234));
        break;
      case Kind::dry: {
        std::vector<const char*> breakers;
        for (const std::string& b : c.dry_breakers) breakers.push_back(b.c_str());
        llama_sampler* dry = llama_sampler_init_dry(vocab, c.dry_multiplier, c.dry_base, c.dry_allowed_length,
                                                    c.dry_penalty_last_n, breakers.data(), breakers.size());
        for (int32_t token : c.history) llama_sampler_accept(dry, token);
        llama_sampler_chain_add(chain, dry);
        break;
      }
    }
    llama_sampler_apply(chain, &cur);
    if (c.kind == Kind::dry) {
      std::vector<std::pair<int32_t, float>> changed;
      for (size_t i = 0; i < cur.size; ++i)
        if (cur.data[i].logit != c.logits[static_cast<size_t>(cur.data[i].id)]) changed.push_back({cur.data[i].id, cur.data[i].logit});
      std::printf("case %d logits %zu", index, changed.size());
      for (auto& [id, logit] : changed) std::printf(" %d %.9g", id, logit);
      std::printf("\n");
    } else {
      print_distribution(index, cur);
    }
    llama_sampler_free(chain);
  }
  llama_model_free(model);
  return 0;
}
