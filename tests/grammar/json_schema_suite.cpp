// The official JSON Schema Test Suite, draft 2020-12 (../shared/data/json-schema-test-suite), through
// our schema compiler: for every schema we accept, no instance the suite marks invalid may be
// accepted (a wrong verdict: the grammar enforces less than the schema), and every valid instance,
// written the way our grammar writes JSON (keys in the schema's order: read into a sorted json here,
// its properties sorted, then required names it does not list, then dependentRequired's names, then
// the rest; no whitespace; or in the order of one of its anyOf / oneOf options, which each write
// their own), must be accepted byte by byte (a wrong verdict too: the
// grammar forbids what the schema allows). A schema we refuse must be refused by a keyword the
// error names. Prints per keyword file: cases, schemas accepted, instances checked, wrong verdicts.
//
// Two refusals of valid instances are by design and counted apart, not failed, since every peer
// grammar engine makes them (docs/server.md): `format` is asserted (draft 2020-12 makes it an
// annotation; a client asking for a date wants a date), and an object holds only the properties
// its schema lists unless additionalProperties says otherwise (xgrammar's strict mode): a valid
// instance refused is counted so when, with its unlisted properties left out, it is accepted.
//
//   json_schema_suite SUITE_DIR [--report FILE.json]   exit 1 on any wrong verdict, 77 without the suite
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inferlab/grammar/grammar_matcher.h"
#include "inferlab/grammar/json_schema.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace inferlab;

namespace {

struct FileTally {
  int cases = 0, accepted = 0, refused = 0;
  int valid = 0, valid_accepted = 0, invalid = 0, invalid_rejected = 0;
  int strict_format = 0, strict_properties = 0;  // valid instances refused by design
  std::map<std::string, int> refused_by;  // keyword -> cases
};

// One token per byte: the grammar is checked on bytes, independent of any tokenizer.
std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  return std::make_shared<const TokenVocabulary>(std::move(bytes));
}

// A number with no fraction written as an integer, as the grammar writes numbers.
json canonical(const json& value) {
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= 9007199254740992.0) return json(static_cast<int64_t>(d));
    return value;
  }
  json out = value;
  if (value.is_array() || value.is_object())
    for (auto& item : out) item = canonical(item);
  return out;
}

// The instance without the properties its (sub)schemas do not list where additionalProperties is
// not given; walks properties and items only.
json without_unlisted(const json& instance, const json& schema) {
  if (!schema.is_object()) return instance;
  if (instance.is_object() && schema.contains("properties") && schema["properties"].is_object()) {
    const json& properties = schema["properties"];
    json out = json::object();
    for (const auto& [key, value] : instance.items()) {
      if (properties.contains(key)) out[key] = without_unlisted(value, properties[key]);
      else if (schema.contains("additionalProperties")) out[key] = value;
    }
    return out;
  }
  if (instance.is_array() && schema.contains("items") && schema["items"].is_object()) {
    json out = json::array();
    for (const json& item : instance) out.push_back(without_unlisted(item, schema["items"]));
    return out;
  }
  return instance;
}

// The property names a schema lists, in the order the compiler merges them: its own 'properties',
// then those its $ref names (a JSON pointer into `root`), then its allOf parts', each read the same
// way, then those of if, then and else (which the compiler reads as alternatives after the rest).
void listed_names(const json& schema, const json& root, std::vector<std::string>& names, int depth = 0) {
  if (!schema.is_object() || depth > 16) return;
  if (schema.contains("properties") && schema["properties"].is_object())
    for (const auto& [key, unused] : schema["properties"].items()) names.push_back(key);
  if (schema.contains("$ref") && schema["$ref"].is_string()) {
    const std::string ref = schema["$ref"].get<std::string>();
    if (ref.rfind("#/", 0) == 0 && root.contains(json::json_pointer(ref.substr(1))))
      listed_names(root[json::json_pointer(ref.substr(1))], root, names, depth + 1);
  }
  if (schema.contains("allOf") && schema["allOf"].is_array())
    for (const json& part : schema["allOf"]) listed_names(part, root, names, depth + 1);
  for (const char* key : {"if", "then", "else"})
    if (schema.contains(key)) listed_names(schema[key], root, names, depth + 1);
}

// The instance as the grammar writes it: an object's keys in its schema's order (the properties as
// 'properties' lists them, which reading the suite into a sorted json has sorted, then those of its
// $ref, allOf parts and if / then / else (listed_names), then required names it does not list, in
// 'required' order), then any others; walks properties and items.
nlohmann::ordered_json in_schema_order(const json& instance, const json& schema, const json& root) {
  using ordered = nlohmann::ordered_json;
  const bool object_schema = schema.is_object();
  if (instance.is_object()) {
    const json none = json::object();
    const json& properties =
        object_schema && schema.contains("properties") && schema["properties"].is_object() ? schema["properties"] : none;
    ordered out = ordered::object();
    auto put = [&](const std::string& key) {
      if (instance.contains(key) && !out.contains(key))
        out[key] = in_schema_order(instance[key], properties.contains(key) ? properties[key] : json(true), root);
    };
    // The parts' properties follow the schema's own, as the compiler merges them.
    std::vector<std::string> names;
    listed_names(schema, root, names);
    for (const std::string& key : names) put(key);
    if (object_schema && schema.contains("required") && schema["required"].is_array())
      for (const json& name : schema["required"])
        if (name.is_string()) put(name.get<std::string>());
    // Then each dependentRequired trigger and the names it requires (dependentSchemas' 'required' too).
    auto dependencies = [&](const json& triggers, bool schemas) {
      for (const auto& [trigger, names] : triggers.items()) {
        if (schemas && !(names.is_object() && names.contains("required"))) continue;  // true / false: not listed
        put(trigger);
        const json& list = schemas ? (names.is_object() && names.contains("required") ? names["required"] : json::array()) : names;
        if (list.is_array())
          for (const json& name : list)
            if (name.is_string()) put(name.get<std::string>());
      }
    };
    if (object_schema && schema.contains("dependentRequired") && schema["dependentRequired"].is_object())
      dependencies(schema["dependentRequired"], false);
    if (object_schema && schema.contains("dependentSchemas") && schema["dependentSchemas"].is_object())
      dependencies(schema["dependentSchemas"], true);
    for (const auto& [key, unused] : instance.items()) put(key);
    return out;
  }
  if (instance.is_array()) {
    ordered out = ordered::array();
    for (const json& item : instance)
      out.push_back(in_schema_order(item, object_schema && schema.contains("items") ? schema["items"] : json(true), root));
    return out;
  }
  return ordered(instance);
}

bool mentions_format(const json& schema) {
  if (schema.is_object()) {
    if (schema.contains("format")) return true;
    for (const auto& [key, value] : schema.items())
      if (mentions_format(value)) return true;
  }
  if (schema.is_array())
    for (const json& item : schema)
      if (mentions_format(item)) return true;
  return false;
}

bool accepts(const std::shared_ptr<CompiledGrammar>& grammar, const std::string& text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept_bytes(text) && matcher.can_finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: json_schema_suite SUITE_DIR [--report FILE.json]\n");
    return 2;
  }
  const fs::path suite = argv[1];
  std::string report_path;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--report") report_path = argv[i + 1];
  if (!fs::is_directory(suite)) {
    std::printf("SKIP: %s missing (../shared/data/json-schema-test-suite)\n", suite.c_str());
    return 77;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(suite))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  const auto vocabulary = byte_vocabulary();
  std::map<std::string, FileTally> tallies;
  std::vector<std::string> wrong;
  for (const fs::path& file : files) {
    FileTally& tally = tallies[file.stem().string()];
    std::ifstream in(file);
    const json cases = json::parse(in);
    for (const json& c : cases) {
      ++tally.cases;
      const std::string where = file.stem().string() + ": " + c.value("description", std::string("?"));
      std::shared_ptr<CompiledGrammar> grammar;
      try {
        grammar = std::make_shared<CompiledGrammar>(parse_gbnf(json_schema_to_gbnf(c["schema"])), vocabulary);
      } catch (const UnsupportedSchemaError& e) {
        ++tally.refused;
        ++tally.refused_by[e.keyword()];
        if (std::string(e.what()).find(e.keyword()) == std::string::npos)
          wrong.push_back(where + ": refused without naming the keyword: " + e.what());
        continue;
      } catch (const std::exception& e) {
        ++tally.refused;
        ++tally.refused_by["(other)"];
        wrong.push_back(where + ": refused with an error that names no keyword: " + e.what());
        continue;
      }
      ++tally.accepted;
      for (const json& t : c["tests"]) {
        const bool valid = t["valid"].get<bool>();
        const json data = canonical(t["data"]);
        const std::string text = in_schema_order(data, c["schema"], c["schema"]).dump();
        bool ours = accepts(grammar, text);
        // An anyOf / oneOf option writes its own properties in its own order.
        for (const char* key : {"anyOf", "oneOf"})
          if (!ours && c["schema"].is_object() && c["schema"].contains(key) && c["schema"][key].is_array())
            for (const json& option : c["schema"][key]) ours = ours || accepts(grammar, in_schema_order(data, option, c["schema"]).dump());
        (valid ? tally.valid : tally.invalid) += 1;
        if (valid && ours) ++tally.valid_accepted;
        if (!valid && !ours) ++tally.invalid_rejected;
        if (valid && !ours && data.is_string() && mentions_format(c["schema"])) {
          ++tally.strict_format;
          continue;
        }
        if (valid && !ours) {
          // Left out under the schema, or under one option of its anyOf.
          std::vector<json> candidates{without_unlisted(data, c["schema"])};
          if (c["schema"].is_object() && c["schema"].contains("anyOf"))
            for (const json& option : c["schema"]["anyOf"]) candidates.push_back(without_unlisted(data, option));
          const bool strict = std::any_of(candidates.begin(), candidates.end(), [&](const json& listed) {
            return listed != data && accepts(grammar, in_schema_order(listed, c["schema"], c["schema"]).dump());
          });
          if (strict) {
            ++tally.strict_properties;
            continue;
          }
        }
        if (valid != ours)
          wrong.push_back(where + " / " + t.value("description", std::string("?")) + ": " + text + " is " +
                          (valid ? "valid" : "invalid") + " but the grammar " + (ours ? "accepts" : "rejects") + " it");
      }
    }
  }
  std::printf("%-24s %6s %9s %8s %15s %17s %18s\n", "keyword file", "cases", "accepted", "refused", "valid accepted",
              "invalid rejected", "strict: fmt/props");
  FileTally total;
  json report = json::object();
  for (const auto& [name, t] : tallies) {
    std::printf("%-24s %6d %9d %8d %9d / %-5d %9d / %-5d %8d / %d\n", name.c_str(), t.cases, t.accepted, t.refused,
                t.valid_accepted, t.valid, t.invalid_rejected, t.invalid, t.strict_format, t.strict_properties);
    report[name] = {{"cases", t.cases}, {"accepted", t.accepted}, {"refused", t.refused}, {"refused_by", t.refused_by},
                    {"valid", t.valid}, {"valid_accepted", t.valid_accepted}, {"invalid", t.invalid},
                    {"invalid_rejected", t.invalid_rejected}, {"strict_format", t.strict_format},
                    {"strict_properties", t.strict_properties}};
    total.cases += t.cases, total.accepted += t.accepted, total.refused += t.refused;
    total.valid += t.valid, total.valid_accepted += t.valid_accepted, total.invalid += t.invalid;
    total.invalid_rejected += t.invalid_rejected;
    total.strict_format += t.strict_format, total.strict_properties += t.strict_properties;
  }
  std::printf("%-24s %6d %9d %8d %9d / %-5d %9d / %-5d %8d / %d\n", "all", total.cases, total.accepted, total.refused,
              total.valid_accepted, total.valid, total.invalid_rejected, total.invalid, total.strict_format,
              total.strict_properties);
  if (!report_path.empty()) std::ofstream(report_path) << report.dump(2) << "\n";
  for (const std::string& w : wrong) std::printf("WRONG: %s\n", w.c_str());
  std::printf("%s: %zu wrong verdicts over %d accepted schemas\n", wrong.empty() ? "passed" : "FAILED", wrong.size(),
              total.accepted);
  return wrong.empty() ? 0 : 1;
}
