// The random cases both sides of the llama.cpp sampler comparison build from an index: the reference
// program (llama_cpp_samplers.cpp, compiled against llama.cpp's prebuilt libraries) and our checker
// (sampler_reference_check.cpp). Plain C++17 with its own generator so both builds make the same rows.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace sampler_cases {

enum class Kind { typical, xtc, chain, dry };

struct Case {
  Kind kind = Kind::typical;
  int top_k = 0;
  float typical_p = 1.0f, top_p = 1.0f, min_p = 0.0f;
  float xtc_probability = 0.0f, xtc_threshold = 0.1f;
  float dry_multiplier = 0.0f, dry_base = 1.75f;
  int dry_allowed_length = 2, dry_penalty_last_n = 64;
  std::vector<std::string> dry_breakers;
  std::vector<float> logits;      // the row; ids are positions
  std::vector<int32_t> history;  // DRY: the tokens seen so far
};

inline uint64_t next(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline double unit(uint64_t& state) { return static_cast<double>(next(state) >> 11) * 0x1.0p-53; }
inline int below(uint64_t& state, int n) { return static_cast<int>(next(state) % static_cast<uint64_t>(n)); }

// Logits with a spread that varies per row and a few spikes, so the filters keep from one token
// to most of them.
inline std::vector<float> make_logits(uint64_t& state, int vocab) {
  const double scale = 0.5 + 6.0 * unit(state);
  std::vector<float> logits(static_cast<std::size_t>(vocab));
  for (float& x : logits) x = static_cast<float>(scale * (unit(state) + unit(state) + unit(state) - 1.5));
  const int spikes = below(state, 6);
  for (int i = 0; i < spikes; ++i) logits[static_cast<std::size_t>(below(state, vocab))] += static_cast<float>(2.0 + 6.0 * unit(state));
  return logits;
}

// alphabet: token ids the DRY histories are drawn from (the tokens of a text holding the
// breakers); model_vocab: the model's vocabulary size (a DRY row is that wide).
inline Case make_case(int index, const std::vector<int32_t>& alphabet, int model_vocab) {
  uint64_t state = 0x5eed0000ull + static_cast<uint64_t>(index);
  Case c;
  c.kind = static_cast<Kind>(index % 4);
  switch (c.kind) {
    case Kind::typical: {
      const float choices[] = {0.05f, 0.2f, 0.5f, 0.9f, 0.95f, 0.99f};
      c.typical_p = unit(state) < 0.5 ? choices[below(state, 6)] : static_cast<float>(0.01 + 0.98 * unit(state));
      c.logits = make_logits(state, 2 + below(state, 3000));
      break;
    }
    case Kind::xtc: {
      c.xtc_probability = 1.0f;  // always applies, so the kept set is fixed (the coin is tested apart)
      c.xtc_threshold = static_cast<float>(0.5 * unit(state));
      c.logits = make_logits(state, 2 + below(state, 400));
      break;
    }
    case Kind::chain: {
      c.top_k = unit(state) < 0.5 ? 0 : 1 + below(state, 300);
      c.typical_p = unit(state) < 0.4 ? 1.0f : static_cast<float>(0.05 + 0.9 * unit(state));
      c.top_p = unit(state) < 0.4 ? 1.0f : static_cast<float>(0.05 + 0.9 * unit(state));
      c.min_p = unit(state) < 0.4 ? 0.0f : static_cast<float>(0.3 * unit(state));
      c.xtc_probability = unit(state) < 0.3 ? 0.0f : 1.0f;
      c.xtc_threshold = static_cast<float>(0.02 + 0.4 * unit(state));
      c.logits = make_logits(state, 2 + below(state, 2000));
      break;
    }
    case Kind::dry: {
      const float multipliers[] = {0.8f, 2.5f, 0.05f};
      const float bases[] = {1.75f, 1.1f, 3.0f, 1.0f};
      const int lasts[] = {64, 16, 1000, 5};
      c.dry_multiplier = multipliers[below(state, 3)];
      c.dry_base = bases[below(state, 4)];
      c.dry_allowed_length = below(state, 5);
      c.dry_penalty_last_n = lasts[below(state, 4)];
      if (unit(state) < 0.5) c.dry_breakers = {"\n", ":", "\"", "*"};  // llama.cpp's defaults
      else c.dry_breakers = {"\n", "Hello world", "The end.", "really*", ""};
      // A history with repeats: random tokens, and runs copied from earlier in it.
      const int length = 1 + below(state, 300);
      while (static_cast<int>(c.history.size()) < length) {
        if (!c.history.empty() && unit(state) < 0.5) {
          const int from = below(state, static_cast<int>(c.history.size()));
          const int run = 1 + below(state, 40);
          for (int i = 0; i < run && from + i < static_cast<int>(c.history.size()); ++i) c.history.push_back(c.history[from + i]);
        } else if (unit(state) < 0.9) {
          c.history.push_back(alphabet[below(state, static_cast<int>(alphabet.size()))]);
        } else {
          c.history.push_back(below(state, model_vocab));
        }
      }
      c.history.resize(static_cast<std::size_t>(length));
      c.logits = make_logits(state, model_vocab);
      break;
    }
  }
  return c;
}

// The text whose tokens make the DRY alphabet: it holds every breaker above, whole and split.
inline const char* alphabet_text() {
  return "Hello world: \"yes\" *really* and so on.\n\nThe end. Hello world, again: the end.\nreally*";
}

}  // namespace sampler_cases
