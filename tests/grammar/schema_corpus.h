// Shared by the grammar tests: the Qwen vocabulary as a TokenVocabulary, a corpus of JSON Schemas,
// and a generator of random documents for a schema, valid or with one error whose byte offset is
// known by construction (the first byte no valid document could have there).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "inferlab/grammar/token_vocabulary.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab::test {

using nlohmann::json;

inline std::shared_ptr<const Tokenizer> qwen_tokenizer() {
  static std::shared_ptr<const Tokenizer> t = Tokenizer::from_folder(QWEN_TOKENIZER_DIR);
  return t;
}

inline std::shared_ptr<const TokenVocabulary> qwen_vocabulary() {
  static std::shared_ptr<const TokenVocabulary> v = [] {
    auto t = qwen_tokenizer();
    std::vector<std::string> bytes(t->vocab_size());
    for (int32_t id = 0; id < t->vocab_size(); ++id)
      if (!t->is_special(id)) bytes[id] = t->decode_bytes(std::span<const int32_t>(&id, 1), false);
    return std::make_shared<TokenVocabulary>(std::move(bytes));
  }();
  return v;
}

inline std::vector<json> schema_corpus() {
  return {
      json::parse(R"({"type":"object","properties":{
        "name":{"type":"string","maxLength":12},
        "age":{"type":"integer"},
        "email":{"type":"string","format":"email"},
        "tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":6},"maxItems":3},
        "role":{"enum":["admin","user","guest"]},
        "active":{"type":"boolean"},
        "address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$","examples":["12345","00000","98765"]}},"required":["city","zip"],"additionalProperties":false}
      },"required":["name","age","role"],"additionalProperties":false})"),
      json::parse(R"({"$defs":{"item":{"type":"object","properties":{"id":{"type":"integer"},"price":{"type":"number"},"kind":{"const":"widget"}},"required":["id","price","kind"],"additionalProperties":false}},
        "type":"object","properties":{
          "items":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":1,"maxItems":4},
          "note":{"anyOf":[{"type":"string","maxLength":10},{"type":"null"}]},
          "when":{"type":"string","format":"date-time"},
          "day":{"type":"string","format":"date"},
          "uid":{"type":"string","format":"uuid"}
        },"required":["items","note","when"],"additionalProperties":false})"),
      json::parse(R"({"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#"},"maxItems":2}},
        "required":["value","children"],"additionalProperties":false})"),
      json::parse(R"({"type":"array","items":{"type":["number","string","boolean","null"]},"minItems":2,"maxItems":5})"),
      json::parse(R"({"type":"object","additionalProperties":{"type":"integer"}})"),
      json::parse(R"({"type":"object","properties":{"answer":{"type":"string","enum":["yes","no"]},"confidence":{"type":"number"},
        "steps":{"type":"array","items":{"type":"object","properties":{"explanation":{"type":"string"},"output":{"type":"string"}},"required":["explanation","output"],"additionalProperties":false}}},
        "required":["answer","confidence","steps"],"additionalProperties":false})"),
  };
}

// Writes random documents of a schema (the corpus's subset of JSON Schema).
class DocumentGenerator {
 public:
  DocumentGenerator(const json& root, uint64_t seed) : root_(root), rng_(seed) {}

  // A valid document.
  std::string valid() {
    inject_at_ = -1;
    return generate();
  }
  // A document with one error; `offset` receives the first wrong byte's offset.
  std::string invalid(std::size_t& offset) {
    for (;;) {
      nodes_ = 0;
      valid();
      inject_at_ = static_cast<int>(pick(0, nodes_ - 1));
      std::string text = generate();
      if (bad_offset_) {
        offset = *bad_offset_;
        return text;
      }
    }
  }

 private:
  std::string generate() {
    out_.clear();
    bad_offset_.reset();
    nodes_ = 0;
    value(root_, false, 0);
    return out_;
  }

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool coin() { return pick(0, 1) == 1; }

  void ws() {
    switch (pick(0, 3)) {
      case 0: case 1: break;
      case 2: out_ += ' '; break;
      default: out_ += "\n" + std::string(static_cast<std::size_t>(pick(0, 4)), ' ');
    }
  }

  void mark() { bad_offset_ = out_.size(); }

  void chars(int count) {
    static const std::vector<std::string> pieces = {"a", "b", "Z", "0", " ", "\\\"", "\\\\", "\\n", "\\u00e9", "é", "中", "-", "x", "{", "]"};
    for (int i = 0; i < count; ++i) out_ += pieces[pick(0, pieces.size() - 1)];
  }

  std::string digits(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>('0' + pick(0, 9));
    return s;
  }

  std::string integer_text() {
    std::string s = coin() ? "-" : "";
    int n = static_cast<int>(pick(1, 6));
    if (n == 1) return s + digits(1);
    return s + static_cast<char>('1' + pick(0, 8)) + digits(n - 1);
  }

  void value(const json& schema_in, bool in_union, int depth) {
    const json* schema = &schema_in;
    while (schema->is_object() && schema->contains("$ref")) {
      std::string ref = (*schema)["$ref"];
      schema = ref == "#" ? &root_ : &root_["$defs"][ref.substr(8)];
    }
    const json& s = *schema;
    const bool inject = nodes_++ == inject_at_;
    if (inject && (in_union || s.contains("const") || s.contains("enum") || s.contains("anyOf") ||
                   (s.contains("type") && s["type"].is_array()))) {
      mark();
      out_ += "~";
      return;
    }
    if (s.contains("const")) {
      out_ += s["const"].dump();
      return;
    }
    if (s.contains("enum")) {
      out_ += s["enum"][pick(0, s["enum"].size() - 1)].dump();
      return;
    }
    if (s.contains("anyOf")) {
      value(s["anyOf"][pick(0, s["anyOf"].size() - 1)], true, depth + 1);
      return;
    }
    if (s.contains("type") && s["type"].is_array()) {
      json one = s;
      one["type"] = s["type"][pick(0, s["type"].size() - 1)];
      value(one, true, depth);
      return;
    }
    const std::string type = s.value("type", "");
    if (type == "object") {
      out_ += "{";
      ws();
      const json props = s.value("properties", json::object());
      if (props.empty()) {  // a map
        int n = static_cast<int>(pick(0, 3));
        for (int i = 0; i < n; ++i) {
          if (i) {
            out_ += ",";
            ws();
          }
          out_ += "\"k" + digits(2) + "\"";
          ws();
          out_ += ":";
          ws();
          value(s["additionalProperties"], in_union, depth + 1);
          ws();
        }
        if (inject) {
          mark();
          out_ += "x";  // neither a key nor '}' nor ','
        }
        out_ += "}";
        return;
      }
      if (inject) {
        mark();
        out_ += "~\":1}";
        return;
      }
      const json required = s.value("required", json::array());
      bool first = true;
      for (const auto& [name, sub] : props.items()) {
        bool needed = std::find(required.begin(), required.end(), name) != required.end();
        if (!needed && (depth > 2 || coin())) continue;
        if (!first) {
          out_ += ",";
          ws();
        }
        first = false;
        out_ += json(name).dump();
        ws();
        out_ += ":";
        ws();
        value(sub, in_union, depth + 1);
        ws();
      }
      out_ += "}";
    } else if (type == "array") {
      int min = s.value("minItems", 0), max = s.value("maxItems", 4);
      if (depth > 3) max = min;
      int n = static_cast<int>(pick(min, std::min(max, min + 3)));
      if (inject && s.contains("maxItems")) n = max;
      out_ += "[";
      ws();
      for (int i = 0; i < n; ++i) {
        if (i) {
          out_ += ",";
          ws();
        }
        value(s.contains("items") ? s["items"] : json::object(), in_union, depth + 1);
        ws();
      }
      if (inject && s.contains("maxItems")) {
        mark();
        out_ += ",1]";
        return;
      }
      if (inject) {
        mark();
        out_ += "~";
      }
      out_ += "]";
    } else if (type == "string") {
      if (inject && !s.contains("maxLength")) {
        mark();
        out_ += "7";
        return;
      }
      out_ += "\"";
      if (s.contains("examples")) {
        out_ += s["examples"][pick(0, s["examples"].size() - 1)].get<std::string>();
      } else if (s.contains("format")) {
        const std::string f = s["format"];
        auto two = [&](int lo, int hi) { return fmt::format("{:02}", pick(lo, hi)); };
        std::string date = digits(4) + "-" + two(1, 12) + "-" + two(1, 28);
        std::string time = two(0, 23) + ":" + two(0, 59) + ":" + two(0, 59) + (coin() ? "Z" : "+02:00");
        if (f == "date") out_ += date;
        else if (f == "date-time") out_ += date + "T" + time;
        else if (f == "uuid") out_ += "123e4567-e89b-12d3-a456-426614174000";
        else out_ += "ab.c" + digits(2) + "@example.org";
      } else {
        int min = s.value("minLength", 0), max = s.value("maxLength", 8);
        int n = static_cast<int>(pick(min, max));
        if (inject) n = max;
        chars(n);
        if (inject) {
          mark();
          chars(1);
        }
      }
      out_ += "\"";
    } else if (type == "integer") {
      out_ += integer_text();
      if (inject) {
        mark();
        out_ += ".5";
      }
    } else if (type == "number") {
      std::string n = integer_text();
      if (inject) {
        n = coin() ? "0" : "-0";
        out_ += n;
        mark();
        out_ += "1";
        return;
      }
      if (coin()) n += "." + digits(static_cast<int>(pick(1, 4)));
      if (coin()) n += std::string(coin() ? "e" : "E") + (coin() ? "-" : "") + digits(static_cast<int>(pick(1, 2)));
      out_ += n;
    } else if (type == "boolean") {
      if (inject) {
        out_ += "tru";
        mark();
        out_ += "x";
        return;
      }
      out_ += coin() ? "true" : "false";
    } else if (type == "null") {
      if (inject) {
        out_ += "nu";
        mark();
        out_ += "x";
        return;
      }
      out_ += "null";
    } else {
      out_ += "null";
    }
  }

  const json& root_;
  std::mt19937_64 rng_;
  std::string out_;
  std::optional<std::size_t> bad_offset_;
  int nodes_ = 0;
  int inject_at_ = -1;
};

}  // namespace inferlab::test
