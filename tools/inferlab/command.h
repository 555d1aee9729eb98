// Each cmd_*.cpp registers its subcommands at start-up: one file per command group.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "inferlab/generation/speculative_decoding.h"
#include "inferlab/model/kv_cache.h"
#include "inferlab/util/error.h"

namespace inferlab::cli {

using CommandSetup = std::function<void(CLI::App& app)>;

struct Registrar {
  explicit Registrar(CommandSetup setup);
};

// A subcommand several files add children to (e.g. `bench`): created by whichever file asks first.
inline CLI::App& command_group(CLI::App& app, const std::string& name, const std::string& description) {
  for (CLI::App* existing : app.get_subcommands([](CLI::App*) { return true; }))
    if (existing->get_name() == name) return *existing;
  CLI::App* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  return *group;
}

// Comma-separated integers in [min, max] ("8,16,32"; empty items skipped). Any other item:
// Error "FLAG: 'ITEM' is not WHAT".
inline std::vector<long> parse_int_list(const std::string& text, long min, long max, const std::string& flag,
                                        const std::string& what) {
  std::vector<long> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < min || value > max) fail("{}: '{}' is not {}", flag, item, what);
    values.push_back(value);
  }
  return values;
}

// --speculative and its knobs, the same on serve, generate and bench engine.
inline void add_speculative_options(CLI::App& cmd, SpeculativeOptions& o) {
  cmd.add_option("--speculative", o.method,
                 "Speculative decoding: off, or ngram (prompt lookup: drafts copied from earlier in the sequence, "
                 "verified in one pass; greedy output unchanged)")
      ->capture_default_str()->check(CLI::IsMember({"off", "ngram"}));
  cmd.add_option("--draft-max", o.draft_max, "Speculative: tokens drafted per step")->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--ngram-max", o.ngram_max, "Speculative: longest suffix looked up")->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--ngram-min", o.ngram_min, "Speculative: shortest suffix looked up")->capture_default_str()->check(CLI::Range(1, 64));
}

// --kv-type, the same on serve, generate and bench engine.
inline void add_kv_type_option(CLI::App& cmd, KVType& type) {
  cmd.add_option_function<std::string>(
         "--kv-type", [&type](const std::string& name) { type = parse_kv_type(name); },
         "KV cache elements: f32, or f16 (half the memory and of what decode at a long context reads; "
         "K and V rounded to half precision)")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->default_str(kv_type_name(type));
}

}  // namespace inferlab::cli
