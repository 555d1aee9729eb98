// Builds the tokenizers from the three on-disk forms: tokenizer.json, vocab.json + merges.txt, GGUF
// (byte-level BpeTokenizer, or SpmBpeTokenizer for SentencePiece-style vocabularies).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "inferlab/util/error.h"
#include "inferlab/loading/gguf.h"
#include "inferlab/util/model_path.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_bpe.h"
#include "tokenizer/wordpiece_tokenizer.h"

namespace inferlab {

using nlohmann::json;
using namespace tokenizer_detail;

namespace {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// o200k (GPT-4o, gpt-oss; llama.cpp's pre "gpt-4o"): words split at case changes, a contraction kept
// with its word, digits in threes, a run of punctuation with the newlines and slashes after it.
const char* const kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open {}", file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const std::filesystem::path& file) {
  std::string text = read_text(file);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{} is not valid JSON: {}", file.string(), e.what());
  }
}

// json accessors that name the file and field when the type is wrong.
struct Fields {
  std::string source;
  const json& object(const json& parent, const char* key, const char* where) const {
    auto it = parent.find(key);
    if (it == parent.end() || !it->is_object()) fail("{}: {}.{} must be an object", source, where, key);
    return *it;
  }
  std::string string(const json& parent, const char* key, const char* where) const {
    auto it = parent.find(key);
    if (it == parent.end() || !it->is_string()) fail("{}: {}.{} must be a string", source, where, key);
    return it->get<std::string>();
  }
  bool boolean(const json& parent, const char* key, bool fallback, const char* where) const {
    auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail("{}: {}.{} must be true or false", source, where, key);
    return it->get<bool>();
  }
  int32_t id(const json& value, const char* where) const {
    if (!value.is_number_integer()) fail("{}: {} must be an integer token id, got {}", source, where, value.dump());
    return value.get<int32_t>();
  }
};

std::string regex_escape(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    auto b = static_cast<unsigned char>(c);
    if (b < 0x80 && !std::isalnum(b)) out += '\\';
    out += c;
  }
  return out;
}

// A Split or Replace pattern: {"Regex": ...} or {"String": ...} (a literal, escaped for PCRE2).
std::shared_ptr<Regex> parse_pattern(const Fields& f, const json& node, const char* where) {
  const json& pattern = f.object(node, "pattern", where);
  if (pattern.contains("Regex")) return std::make_shared<Regex>(f.string(pattern, "Regex", where));
  if (pattern.contains("String")) {
    std::string literal = f.string(pattern, "String", where);
    if (literal.empty()) fail("{}: {}.pattern.String is empty", f.source, where);
    return std::make_shared<Regex>(regex_escape(literal));
  }
  fail("{}: {}.pattern needs Regex or String", f.source, where);
}

void parse_normalizer(const Fields& f, const json& node, std::vector<Normalizer>& out, int depth = 0) {
  if (node.is_null()) return;
  if (depth > 32) fail("{}: normalizer Sequences nested deeper than 32 levels", f.source);
  if (!node.is_object()) fail("{}: normalizer must be an object or null", f.source);
  std::string type = f.string(node, "type", "normalizer");
  if (type == "NFC") out.push_back(NormalizerKind::NFC);
  else if (type == "NFD") out.push_back(NormalizerKind::NFD);
  else if (type == "NFKC") out.push_back(NormalizerKind::NFKC);
  else if (type == "NFKD") out.push_back(NormalizerKind::NFKD);
  else if (type == "Lowercase") out.push_back(NormalizerKind::Lowercase);
  else if (type == "Prepend") {
    Normalizer prepend(NormalizerKind::Prepend);
    prepend.text = f.string(node, "prepend", "normalizer(Prepend)");
    out.push_back(std::move(prepend));
  } else if (type == "Replace") {
    Normalizer replace(NormalizerKind::Replace);
    const json& pattern = f.object(node, "pattern", "normalizer(Replace)");
    if (pattern.contains("String")) {
      replace.literal = f.string(pattern, "String", "normalizer(Replace).pattern");
      if (replace.literal.empty()) fail("{}: normalizer(Replace).pattern.String is empty", f.source);
    } else {
      replace.regex = parse_pattern(f, node, "normalizer(Replace)");
    }
    replace.text = f.string(node, "content", "normalizer(Replace)");
    out.push_back(std::move(replace));
  } else if (type == "Sequence") {
    auto it = node.find("normalizers");
    if (it == node.end() || !it->is_array()) fail("{}: normalizer Sequence needs a normalizers array", f.source);
    for (const json& child : *it) parse_normalizer(f, child, out, depth + 1);
  } else {
    fail("{}: normalizer type {:?} is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence)",
         f.source, type);
  }
}

// Digits split off as pieces of their own (Hugging Face's Digits pre-tokenizer; llama.cpp's "\p{N}"
// step of the smollm / starcoder pre-tokenizers): each digit, or each run of digits.
PreTokenizerStep digit_split(bool individual_digits) {
  PreTokenizerStep step{PreTokenizerStep::Kind::Split};
  step.regex = std::make_shared<Regex>(individual_digits ? R"(\p{N})" : R"(\p{N}+)");
  return step;
}

SplitBehavior parse_behavior(const Fields& f, const std::string& name) {
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail("{}: Split behavior {:?} is not supported", f.source, name);
}

void parse_pre_tokenizer(const Fields& f, const json& node, std::vector<PreTokenizerStep>& out, int depth = 0) {
  if (node.is_null()) return;
  if (depth > 32) fail("{}: pre_tokenizer Sequences nested deeper than 32 levels", f.source);
  if (!node.is_object()) fail("{}: pre_tokenizer must be an object or null", f.source);
  std::string type = f.string(node, "type", "pre_tokenizer");
  if (type == "Sequence") {
    auto it = node.find("pretokenizers");
    if (it == node.end() || !it->is_array()) fail("{}: pre_tokenizer Sequence needs a pretokenizers array", f.source);
    for (const json& child : *it) parse_pre_tokenizer(f, child, out, depth + 1);
  } else if (type == "ByteLevel") {
    PreTokenizerStep step{PreTokenizerStep::Kind::ByteLevel};
    step.add_prefix_space = f.boolean(node, "add_prefix_space", true, "pre_tokenizer(ByteLevel)");
    if (f.boolean(node, "use_regex", true, "pre_tokenizer(ByteLevel)")) step.regex = std::make_shared<Regex>(kGpt2Pattern);
    out.push_back(std::move(step));
  } else if (type == "Digits") {
    out.push_back(digit_split(f.boolean(node, "individual_digits", false, "pre_tokenizer(Digits)")));
  } else if (type == "Split") {
    PreTokenizerStep step{PreTokenizerStep::Kind::Split};
    step.regex = parse_pattern(f, node, "pre_tokenizer(Split)");
    step.behavior = parse_behavior(f, f.string(node, "behavior", "pre_tokenizer(Split)"));
    step.invert = f.boolean(node, "invert", false, "pre_tokenizer(Split)");
    out.push_back(std::move(step));
  } else if (type == "Metaspace") {
    // Hugging Face tokenizers' semantics: spaces become the replacement, one is prepended per
    // prepend_scheme (older files: add_prefix_space), and with split the text is cut before each.
    PreTokenizerStep step{PreTokenizerStep::Kind::Metaspace};
    step.replacement = node.contains("replacement") ? f.string(node, "replacement", "pre_tokenizer(Metaspace)") : "\u2581";
    if (step.replacement.empty()) fail("{}: pre_tokenizer(Metaspace).replacement is empty", f.source);
    if (node.contains("prepend_scheme")) {
      std::string scheme = f.string(node, "prepend_scheme", "pre_tokenizer(Metaspace)");
      if (scheme == "always") step.prepend = PrependScheme::Always;
      else if (scheme == "first") step.prepend = PrependScheme::First;
      else if (scheme == "never") step.prepend = PrependScheme::Never;
      else fail("{}: pre_tokenizer(Metaspace).prepend_scheme {:?} is not always, first or never", f.source, scheme);
    } else {
      step.prepend = f.boolean(node, "add_prefix_space", true, "pre_tokenizer(Metaspace)") ? PrependScheme::Always : PrependScheme::Never;
    }
    if (f.boolean(node, "split", true, "pre_tokenizer(Metaspace)")) {
      step.regex = std::make_shared<Regex>(regex_escape(step.replacement));
      step.behavior = SplitBehavior::MergedWithNext;
    }
    out.push_back(std::move(step));
  } else {
    fail("{}: pre_tokenizer type {:?} is not supported (supported: ByteLevel, Split, Digits, Metaspace, Sequence)", f.source, type);
  }
}

void parse_post_processor(const Fields& f, const json& node, PostProcessor& out, int depth = 0) {
  if (node.is_null()) return;
  if (depth > 32) fail("{}: post_processor Sequences nested deeper than 32 levels", f.source);
  if (!node.is_object()) fail("{}: post_processor must be an object or null", f.source);
  std::string type = f.string(node, "type", "post_processor");
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    auto it = node.find("processors");
    if (it == node.end() || !it->is_array()) fail("{}: post_processor Sequence needs a processors array", f.source);
    for (const json& child : *it) parse_post_processor(f, child, out, depth + 1);
    return;
  }
  if (type == "TemplateProcessing") {
    auto single = node.find("single");
    if (single == node.end() || !single->is_array()) fail("{}: TemplateProcessing needs a single array", f.source);
    const json* special = node.contains("special_tokens") ? &node["special_tokens"] : nullptr;
    bool after_sequence = false;
    for (const json& item : *single) {
      if (item.contains("Sequence")) {
        after_sequence = true;
      } else if (item.contains("SpecialToken")) {
        std::string name = f.string(item["SpecialToken"], "id", "TemplateProcessing.single.SpecialToken");
        if (!special || !special->contains(name))
          fail("{}: TemplateProcessing uses special token {:?} missing from special_tokens", f.source, name);
        // find, not const operator[]: a missing key there is undefined behaviour (read past the map).
        const json& entry = special->find(name).value();
        auto ids_it = entry.is_object() ? entry.find("ids") : entry.end();
        if (!entry.is_object() || ids_it == entry.end()) fail("{}: special_tokens.{} needs an ids array", f.source, name);
        const json& ids = *ids_it;
        if (!ids.is_array()) fail("{}: special_tokens.{}.ids must be an array", f.source, name);
        for (const json& id : ids) (after_sequence ? out.suffix : out.prefix).push_back(f.id(id, "special_tokens ids"));
      } else {
        fail("{}: TemplateProcessing item {} is neither Sequence nor SpecialToken", f.source, item.dump());
      }
    }
    return;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      auto found = node.find(key);  // not const operator[]: undefined behaviour on a missing key
      if (found == node.end()) fail("{}: {} needs {}", f.source, type, key);
      const json& pair = *found;
      if (!pair.is_array() || pair.size() != 2) fail("{}: {}.{} must be [token, id]", f.source, type, key);
      (std::string(key) == "cls" ? out.prefix : out.suffix).push_back(f.id(pair[1], key));
    }
    return;
  }
  fail("{}: post_processor type {:?} is not supported (supported: ByteLevel, TemplateProcessing, "
       "RobertaProcessing, BertProcessing, Sequence)", f.source, type);
}

std::pair<std::string, std::string> split_merge(const Fields& f, const std::string& line, std::size_t index) {
  std::size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size() || line.find(' ', space + 1) != std::string::npos)
    fail("{}: merge {} {:?} is not two pieces separated by one space", f.source, index, line);
  return {line.substr(0, space), line.substr(space + 1)};
}

std::string token_string(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) return value["content"].get<std::string>();
  return {};
}

// tokenizer_config.json next to the tokenizer: chat template, BOS/EOS names, added tokens. A
// chat_template.jinja beside it (how transformers saves a template now, and how gpt-oss ships its
// own) is the template, before the config's, as transformers reads them.
void apply_tokenizer_config(const std::filesystem::path& folder, Spec& spec, bool take_added_tokens) {
  const std::filesystem::path template_file = folder / "chat_template.jinja";
  const bool template_in_file = std::filesystem::exists(template_file);
  if (template_in_file) spec.chat_template = read_text(template_file);
  std::filesystem::path file = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(file)) return;
  json config = read_json(file);
  if (!config.is_object()) fail("{}: must be a JSON object", file.string());
  if (auto it = config.find("chat_template"); it != config.end() && !template_in_file) {
    if (it->is_string()) {
      spec.chat_template = it->get<std::string>();
    } else if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
      for (const json& entry : *it)
        if (entry.is_object() && entry.value("name", "") == "default") spec.chat_template = entry.value("template", "");
    }
  }
  if (config.contains("bos_token")) spec.bos_token = token_string(config["bos_token"]);
  if (config.contains("eos_token")) spec.eos_token = token_string(config["eos_token"]);
  if (take_added_tokens && config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object()) {
    Fields f{file.string()};
    for (const auto& [id, token] : config["added_tokens_decoder"].items()) {
      AddedToken added;
      try {
        added.id = std::stoi(id);
      } catch (const std::exception&) {
        fail("{}: added_tokens_decoder key {:?} is not a token id", file.string(), id);
      }
      added.content = f.string(token, "content", "added_tokens_decoder");
      added.special = f.boolean(token, "special", false, "added_tokens_decoder");
      added.lstrip = f.boolean(token, "lstrip", false, "added_tokens_decoder");
      added.rstrip = f.boolean(token, "rstrip", false, "added_tokens_decoder");
      added.single_word = f.boolean(token, "single_word", false, "added_tokens_decoder");
      added.normalized = f.boolean(token, "normalized", !added.special, "added_tokens_decoder");
      spec.added_tokens.push_back(added);
    }
  }
}

// tokenizer.json's added_tokens, for every model type.
void parse_added_tokens(const Fields& f, const json& root, std::vector<AddedToken>& out) {
  auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return;
  if (!added->is_array()) fail("{}: added_tokens must be an array", f.source);
  for (const json& token : *added) {
    if (!token.is_object()) fail("{}: each added_tokens entry must be an object", f.source);
    AddedToken t;
    t.id = f.id(token.contains("id") ? token["id"] : json(), "added_tokens[].id");
    t.content = f.string(token, "content", "added_tokens[]");
    t.special = f.boolean(token, "special", false, "added_tokens[]");
    t.lstrip = f.boolean(token, "lstrip", false, "added_tokens[]");
    t.rstrip = f.boolean(token, "rstrip", false, "added_tokens[]");
    t.single_word = f.boolean(token, "single_word", false, "added_tokens[]");
    t.normalized = f.boolean(token, "normalized", !t.special, "added_tokens[]");
    out.push_back(std::move(t));
  }
}

bool mentions_type(const json& node, const char* type, int depth = 0) {
  if (depth > 32) return false;
  if (node.is_object()) {
    if (auto it = node.find("type"); it != node.end() && it->is_string() && *it == type) return true;
    for (const auto& [key, child] : node.items())
      if (mentions_type(child, type, depth + 1)) return true;
  } else if (node.is_array()) {
    for (const json& child : node)
      if (mentions_type(child, type, depth + 1)) return true;
  }
  return false;
}

// A SentencePiece-style decoder: Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", start <= 1,
// stop 0) or Metaspace, alone or in a Sequence. Their effect beyond what SpmBpeTokenizer always does
// ("▁" is a space, <0xNN> a byte) is the rule at the start of the text.
SpmTextStart parse_spm_decoder(const Fields& f, const json& node, int depth = 0) {
  if (node.is_null()) fail("{}: a SentencePiece-style tokenizer needs a decoder (Replace/ByteFallback/Fuse or Metaspace)", f.source);
  if (depth > 32) fail("{}: decoder Sequences nested deeper than 32 levels", f.source);
  if (!node.is_object()) fail("{}: decoder must be an object", f.source);
  std::string type = f.string(node, "type", "decoder");
  if (type == "Sequence") {
    auto it = node.find("decoders");
    if (it == node.end() || !it->is_array()) fail("{}: decoder Sequence needs a decoders array", f.source);
    SpmTextStart start = SpmTextStart::Keep;
    for (const json& child : *it) {
      SpmTextStart s = parse_spm_decoder(f, child, depth + 1);
      if (s != SpmTextStart::Keep) start = s;
    }
    return start;
  }
  if (type == "ByteFallback" || type == "Fuse") return SpmTextStart::Keep;
  if (type == "Replace") {
    const json& pattern = f.object(node, "pattern", "decoder(Replace)");
    if (!pattern.contains("String") || f.string(pattern, "String", "decoder(Replace).pattern") != "\u2581" ||
        f.string(node, "content", "decoder(Replace)") != " ")
      fail("{}: decoder Replace must turn \"\u2581\" into \" \" (found {})", f.source, node.dump());
    return SpmTextStart::Keep;
  }
  if (type == "Strip") {
    if (f.string(node, "content", "decoder(Strip)") != " " || node.value("stop", 0) != 0 || node.value("start", 0) > 1)
      fail("{}: decoder Strip is supported for content \" \", start 0 or 1 and stop 0 (found {})", f.source, node.dump());
    return node.value("start", 0) == 1 ? SpmTextStart::StripSpace : SpmTextStart::Keep;
  }
  if (type == "Metaspace") {
    if (node.contains("replacement") && f.string(node, "replacement", "decoder(Metaspace)") != "\u2581")
      fail("{}: decoder Metaspace with a replacement other than \"\u2581\" is not supported", f.source);
    std::string scheme = node.contains("prepend_scheme") ? f.string(node, "prepend_scheme", "decoder(Metaspace)")
                         : f.boolean(node, "add_prefix_space", true, "decoder(Metaspace)") ? "always" : "never";
    return scheme == "never" ? SpmTextStart::Keep : SpmTextStart::DropFirstMetaspace;
  }
  fail("{}: decoder type {:?} is not supported for a SentencePiece-style tokenizer (supported: Replace, ByteFallback, "
       "Fuse, Strip, Metaspace, Sequence)", f.source, type);
}

// transformers' LlamaTokenizerFast and GemmaTokenizerFast rebuild the post-processor from
// tokenizer_config.json's add_bos_token / add_eos_token (defaults true / false); add_prefix_space
// there makes them re-convert the SentencePiece model, which needs tokenizer.model: refused.
// legacy only matters for that conversion, so a tokenizer.json is used as written.
void apply_spm_tokenizer_config(const std::filesystem::path& folder, Spec& spec) {
  std::filesystem::path file = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(file)) return;
  json config = read_json(file);
  Fields f{file.string()};
  std::string cls = config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
                        ? config["tokenizer_class"].get<std::string>() : "";
  if (!(cls.starts_with("Llama") || cls.starts_with("Gemma") || cls.starts_with("CodeLlama"))) return;
  if (config.contains("add_prefix_space") && !config["add_prefix_space"].is_null())
    fail("{}: add_prefix_space makes transformers rebuild this tokenizer from tokenizer.model (SentencePiece); "
         "not supported: remove the key to use tokenizer.json as written", file.string());
  bool add_bos = f.boolean(config, "add_bos_token", true, "tokenizer_config");
  bool add_eos = f.boolean(config, "add_eos_token", false, "tokenizer_config");
  auto id_of = [&](const std::string& name, const char* which) {
    for (const AddedToken& t : spec.added_tokens)
      if (t.content == name) return t.id;
    if (auto it = spec.vocab.find(name); it != spec.vocab.end()) return it->second;
    fail("{}: {}_token {:?} is neither an added token nor in the vocabulary", file.string(), which, name);
  };
  spec.post_processor = {};
  if (add_bos) {
    if (spec.bos_token.empty()) fail("{}: add_bos_token is true but there is no bos_token", file.string());
    spec.post_processor.prefix.push_back(id_of(spec.bos_token, "bos"));
  }
  if (add_eos) {
    if (spec.eos_token.empty()) fail("{}: add_eos_token is true but there is no eos_token", file.string());
    spec.post_processor.suffix.push_back(id_of(spec.eos_token, "eos"));
  }
}

// ---- WordPiece (BERT family) ----------------------------------------------------------------

// BertNormalizer (strip_accents null: as lowercase), or none.
std::optional<BertNormalizerOptions> parse_wordpiece_normalizer(const Fields& f, const json& node) {
  if (node.is_null()) return std::nullopt;
  if (!node.is_object()) fail("{}: normalizer must be an object or null", f.source);
  std::string type = f.string(node, "type", "normalizer");
  if (type != "BertNormalizer")
    fail("{}: normalizer type {:?} is not supported for a WordPiece tokenizer (supported: BertNormalizer, or none)",
         f.source, type);
  const char* where = "normalizer(BertNormalizer)";
  BertNormalizerOptions options;
  options.clean_text = f.boolean(node, "clean_text", true, where);
  options.handle_chinese_chars = f.boolean(node, "handle_chinese_chars", true, where);
  options.lowercase = f.boolean(node, "lowercase", true, where);
  options.strip_accents = f.boolean(node, "strip_accents", options.lowercase, where);
  return options;
}

void apply_wordpiece_tokenizer_config(const std::filesystem::path& folder, WordPieceSpec& spec) {
  Spec config;  // the BPE loader's reader: chat template, BOS/EOS names
  apply_tokenizer_config(folder, config, false);
  spec.chat_template = std::move(config.chat_template);
  spec.bos_token = std::move(config.bos_token);
  spec.eos_token = std::move(config.eos_token);
}

std::shared_ptr<const Tokenizer> wordpiece_from_json(const Fields& f, const json& root, const json& model,
                                                     const std::filesystem::path& folder) {
  WordPieceSpec spec;
  spec.source = f.source;
  const json& vocab = f.object(model, "vocab", "model");
  spec.vocab.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) spec.vocab.emplace(piece, f.id(id, "model.vocab value"));
  if (model.contains("unk_token")) spec.unk_token = f.string(model, "unk_token", "model");
  if (model.contains("continuing_subword_prefix"))
    spec.continuing_subword_prefix = f.string(model, "continuing_subword_prefix", "model");
  if (auto it = model.find("max_input_chars_per_word"); it != model.end()) {
    if (!it->is_number_unsigned()) fail("{}: model.max_input_chars_per_word must be a non-negative integer", f.source);
    spec.max_input_chars_per_word = it->get<std::size_t>();
  }
  parse_added_tokens(f, root, spec.added_tokens);
  spec.normalizer = parse_wordpiece_normalizer(f, root.value("normalizer", json()));
  const json pre = root.value("pre_tokenizer", json());
  if (pre.is_null()) {
    spec.bert_pre_tokenizer = false;
  } else {
    if (!pre.is_object()) fail("{}: pre_tokenizer must be an object or null", f.source);
    std::string type = f.string(pre, "type", "pre_tokenizer");
    if (type != "BertPreTokenizer")
      fail("{}: pre_tokenizer type {:?} is not supported for a WordPiece tokenizer (supported: BertPreTokenizer, or none)",
           f.source, type);
  }
  parse_post_processor(f, root.value("post_processor", json()), spec.post_processor);
  const json decoder = root.value("decoder", json());
  if (decoder.is_null()) {
    spec.wordpiece_decoder = false;
  } else {
    if (!decoder.is_object()) fail("{}: decoder must be an object or null", f.source);
    std::string type = f.string(decoder, "type", "decoder");
    if (type != "WordPiece")
      fail("{}: decoder type {:?} is not supported for a WordPiece tokenizer (supported: WordPiece, or none)", f.source, type);
    if (decoder.contains("prefix")) spec.decoder_prefix = f.string(decoder, "prefix", "decoder(WordPiece)");
    spec.decoder_cleanup = f.boolean(decoder, "cleanup", true, "decoder(WordPiece)");
  }
  apply_wordpiece_tokenizer_config(folder, spec);
  return std::make_shared<WordPieceTokenizer>(std::move(spec));
}

// A BERT folder without tokenizer.json: vocab.txt (one piece per line, the line number its id) and
// tokenizer_config.json naming a Bert tokenizer class. transformers builds the same pipeline as a
// tokenizer.json would hold: BertNormalizer, BertPreTokenizer, [CLS] $A [SEP], the WordPiece decoder.
std::shared_ptr<const Tokenizer> wordpiece_from_vocab_txt(const std::filesystem::path& folder) {
  std::filesystem::path config_file = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(config_file))
    fail("{}: vocab.txt without tokenizer.json needs a tokenizer_config.json naming a BERT tokenizer class", folder.string());
  json config = read_json(config_file);
  Fields cf{config_file.string()};
  if (!config.is_object()) fail("{}: must be a JSON object", cf.source);
  std::string cls = config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
                        ? config["tokenizer_class"].get<std::string>() : "";
  if (cls != "BertTokenizer" && cls != "BertTokenizerFast")
    fail("{}: tokenizer_class {:?} with vocab.txt is not supported (supported: BertTokenizer, BertTokenizerFast; "
         "or a tokenizer.json)", cf.source, cls);
  if (!cf.boolean(config, "do_basic_tokenize", true, "tokenizer_config"))
    fail("{}: do_basic_tokenize false is not supported (no BERT pre-tokenization)", cf.source);
  if (auto it = config.find("never_split"); it != config.end() && !it->is_null() && !(it->is_array() && it->empty()))
    fail("{}: never_split is not supported", cf.source);

  WordPieceSpec spec;
  spec.source = (folder / "vocab.txt").string();
  std::istringstream lines(read_text(folder / "vocab.txt"));
  int32_t next_id = 0;
  for (std::string line; std::getline(lines, line); ++next_id) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    spec.vocab[line] = next_id;  // a repeated line: the later id, as transformers' dict keeps it
  }
  BertNormalizerOptions normalizer;
  normalizer.lowercase = cf.boolean(config, "do_lower_case", true, "tokenizer_config");
  normalizer.handle_chinese_chars = cf.boolean(config, "tokenize_chinese_chars", true, "tokenizer_config");
  normalizer.strip_accents = cf.boolean(config, "strip_accents", normalizer.lowercase, "tokenizer_config");
  spec.normalizer = normalizer;
  auto name = [&](const char* key, const char* fallback) {
    std::string value = config.contains(key) ? token_string(config[key]) : "";
    return value.empty() ? std::string(fallback) : value;
  };
  spec.unk_token = name("unk_token", "[UNK]");
  std::string cls_token = name("cls_token", "[CLS]"), sep_token = name("sep_token", "[SEP]");
  auto id_of = [&](const std::string& token, const char* which) {
    auto it = spec.vocab.find(token);
    if (it == spec.vocab.end()) fail("{}: {} {:?} is not in vocab.txt", cf.source, which, token);
    return it->second;
  };
  for (const auto& [key, fallback] : {std::pair{"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"},
                                      {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"}}) {
    std::string token = name(key, fallback);
    if (auto it = spec.vocab.find(token); it != spec.vocab.end()) spec.added_tokens.push_back({token, it->second, true});
  }
  // Tokens added after training (added_tokens_decoder), as transformers keeps them; an entry for a
  // special token above replaces it.
  Spec added;
  apply_tokenizer_config(folder, added, true);
  for (AddedToken& token : added.added_tokens) {
    std::erase_if(spec.added_tokens, [&](const AddedToken& t) { return t.id == token.id; });
    spec.added_tokens.push_back(std::move(token));
  }
  spec.post_processor.prefix = {id_of(cls_token, "cls_token")};
  spec.post_processor.suffix = {id_of(sep_token, "sep_token")};
  apply_wordpiece_tokenizer_config(folder, spec);
  return std::make_shared<WordPieceTokenizer>(std::move(spec));
}

}  // namespace

namespace {
std::shared_ptr<const Tokenizer> tokenizer_from_json(const std::filesystem::path& file);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_tokenizer_json(const std::filesystem::path& file) {
  try {
    return tokenizer_from_json(file);
  } catch (const json::exception& e) {  // a field of the wrong type somewhere
    fail("{}: malformed tokenizer.json: {}", file.string(), e.what());
  }
}

namespace {
std::shared_ptr<const Tokenizer> tokenizer_from_json(const std::filesystem::path& file) {
  json root = read_json(file);
  Spec spec;
  spec.source = file.string();
  Fields f{spec.source};
  if (!root.is_object()) fail("{}: must be a JSON object", spec.source);
  const json& model = f.object(root, "model", "tokenizer");
  std::string type = model.value("type", "BPE");
  if (type == "WordPiece") return wordpiece_from_json(f, root, model, file.parent_path());
  if (type != "BPE")
    fail("{}: model type {:?} is not supported (supported: BPE, byte-level or SentencePiece-style with byte_fallback; "
         "WordPiece)", spec.source, type);
  const json decoder = root.value("decoder", json());
  // SentencePiece-style: byte fallback, or a decoder that turns "▁" back into spaces.
  bool sentencepiece = f.boolean(model, "byte_fallback", false, "model") || mentions_type(decoder, "ByteFallback") ||
                       mentions_type(decoder, "Metaspace");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      fail("{}: model.{} is set; only BPE without subword affixes is supported", spec.source, key);
  spec.ignore_merges = f.boolean(model, "ignore_merges", false, "model");
  const json& vocab = f.object(model, "vocab", "model");
  spec.vocab.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) spec.vocab.emplace(piece, f.id(id, "model.vocab value"));
  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) fail("{}: model.merges must be an array", spec.source);
  spec.merges.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& merge = (*merges)[i];
    if (merge.is_string()) {
      spec.merges.push_back(split_merge(f, merge.get<std::string>(), i));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      fail("{}: model.merges[{}] must be \"a b\" or [\"a\", \"b\"], got {}", spec.source, i, merge.dump());
    }
  }
  parse_added_tokens(f, root, spec.added_tokens);
  parse_normalizer(f, root.value("normalizer", json()), spec.normalizers);
  parse_pre_tokenizer(f, root.value("pre_tokenizer", json()), spec.pre_tokenizers);
  parse_post_processor(f, root.value("post_processor", json()), spec.post_processor);
  // A post-processor id must name a token, or encode() would hand the model an id past its vocabulary.
  for (const auto* ids : {&spec.post_processor.prefix, &spec.post_processor.suffix})
    for (int32_t id : *ids) {
      bool known = std::any_of(spec.added_tokens.begin(), spec.added_tokens.end(), [id](const auto& t) { return t.id == id; }) ||
                   std::any_of(spec.vocab.begin(), spec.vocab.end(), [id](const auto& v) { return v.second == id; });
      if (!known) fail("{}: post_processor adds token id {}, which is neither in model.vocab nor in added_tokens", f.source, id);
    }
  apply_tokenizer_config(file.parent_path(), spec, false);
  if (!sentencepiece) return std::make_shared<BpeTokenizer>(std::move(spec));
  SpmOptions options;
  options.byte_fallback = f.boolean(model, "byte_fallback", false, "model");
  options.fuse_unk = f.boolean(model, "fuse_unk", false, "model");
  if (auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    std::string name = f.string(model, "unk_token", "model");
    auto it = spec.vocab.find(name);
    if (it == spec.vocab.end()) fail("{}: model.unk_token {:?} is not in model.vocab", spec.source, name);
    options.unk_id = it->second;
  }
  options.text_start = parse_spm_decoder(f, decoder);
  apply_spm_tokenizer_config(file.parent_path(), spec);
  return std::make_shared<SpmBpeTokenizer>(std::move(spec), options);
}
}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::from_vocab_merges(const std::filesystem::path& vocab_json,
                                                              const std::filesystem::path& merges_txt) {
  Spec spec;
  spec.source = vocab_json.string();
  Fields f{spec.source};
  json vocab = read_json(vocab_json);
  if (!vocab.is_object()) fail("{}: must be an object of piece -> id", spec.source);
  for (const auto& [piece, id] : vocab.items()) spec.vocab.emplace(piece, f.id(id, "vocab value"));
  std::istringstream lines(read_text(merges_txt));
  Fields mf{merges_txt.string()};
  std::string line;
  for (std::size_t n = 0; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 0 && line.starts_with("#version"))) continue;
    spec.merges.push_back(split_merge(mf, line, n + 1));
  }
  PreTokenizerStep byte_level{PreTokenizerStep::Kind::ByteLevel};
  byte_level.regex = std::make_shared<Regex>(kGpt2Pattern);
  spec.pre_tokenizers.push_back(std::move(byte_level));
  apply_tokenizer_config(vocab_json.parent_path(), spec, true);
  if (spec.added_tokens.empty())
    if (auto it = spec.vocab.find("<|endoftext|>"); it != spec.vocab.end())
      spec.added_tokens.push_back({"<|endoftext|>", it->second, true});
  return std::make_shared<BpeTokenizer>(std::move(spec));
}

namespace {
std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const std::filesystem::path& file);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_gguf(const std::filesystem::path& file) {
  try {
    return tokenizer_from_gguf(file);
  } catch (const json::exception& e) {  // every value is type-checked below; this is the safety net
    fail("{}: malformed tokenizer metadata in GGUF: {}", file.string(), e.what());
  }
}

namespace {

// Special ids, add_bos/add_eos and the chat template, as llama.cpp reads them (absent ids are fine;
// present but outside the vocabulary is an error). add_bos defaults per vocabulary type.
void gguf_special_tokens(const GgufFile& gguf, const json& tokens, bool add_bos_default, Spec& spec) {
  auto token_id = [&](const char* key) -> std::optional<int32_t> {
    const json* id = gguf.find(key);
    if (!id) return std::nullopt;
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() >= static_cast<int64_t>(tokens.size()))
      fail("{}: GGUF metadata {} must be a token id 0..{}, found {}", spec.source, key, tokens.size() - 1, id->dump());
    return static_cast<int32_t>(id->get<int64_t>());
  };
  auto flag = [&](const char* key, bool fallback) {
    const json* value = gguf.find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) fail("{}: GGUF metadata {} must be a bool, found {}", spec.source, key, value->type_name());
    return value->get<bool>();
  };
  auto bos = token_id("tokenizer.ggml.bos_token_id"), eos = token_id("tokenizer.ggml.eos_token_id");
  if (bos) spec.bos_token = tokens[*bos].get<std::string>();
  if (eos) spec.eos_token = tokens[*eos].get<std::string>();
  if (flag("tokenizer.ggml.add_bos_token", add_bos_default && bos.has_value())) {
    if (!bos) fail("{}: GGUF metadata tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id", spec.source);
    spec.post_processor.prefix.push_back(*bos);
  }
  if (flag("tokenizer.ggml.add_eos_token", false)) {
    if (!eos) fail("{}: GGUF metadata tokenizer.ggml.add_eos_token is true but there is no tokenizer.ggml.eos_token_id", spec.source);
    spec.post_processor.suffix.push_back(*eos);
  }
  if (const json* chat = gguf.find("tokenizer.chat_template")) {
    if (!chat->is_string()) fail("{}: GGUF metadata tokenizer.chat_template must be a string, found {}", spec.source, chat->type_name());
    spec.chat_template = chat->get<std::string>();
  }
}

// tokenizer.ggml.model "llama": SentencePiece BPE, which merges the adjacent pair whose joined text is
// the vocabulary entry with the highest score (ties: leftmost). That is BPE with one merge per way of
// splitting each entry in two known pieces, ranked by the entry's score.
std::shared_ptr<const Tokenizer> spm_from_gguf(const GgufFile& gguf, const json& tokens, Spec spec) {
  const json* scores = gguf.find("tokenizer.ggml.scores");
  if (!scores || !scores->is_array() || scores->size() != tokens.size())
    fail("{}: tokenizer.ggml.model \"llama\" needs tokenizer.ggml.scores with one number per token", spec.source);
  std::unordered_map<std::string, int32_t> all;  // every token text (vocab and added) -> id
  all.reserve(tokens.size());
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!(*scores)[id].is_number()) fail("{}: tokenizer.ggml.scores[{}] must be a number", spec.source, id);
    all.emplace(tokens[id].get<std::string>(), static_cast<int32_t>(id));
  }
  struct Candidate {
    float score;
    std::string left, right;
  };
  std::vector<Candidate> candidates;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string& text = tokens[id].get_ref<const std::string&>();
    if (all.at(text) != static_cast<int32_t>(id)) continue;  // a repeated text: the first id stands
    for (std::size_t cut = 1; cut < text.size(); ++cut) {
      if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) continue;  // inside a character
      std::string left = text.substr(0, cut), right = text.substr(cut);
      if (all.contains(left) && all.contains(right))
        candidates.push_back({(*scores)[id].get<float>(), std::move(left), std::move(right)});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  int32_t rank = -1;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (i == 0 || candidates[i].score != candidates[i - 1].score) ++rank;  // equal scores, equal rank
    spec.merges.emplace_back(std::move(candidates[i].left), std::move(candidates[i].right));
    spec.merge_ranks.push_back(rank);
  }
  // llama.cpp: a space in front of each text fragment (add_space_prefix, default true), spaces
  // written as "▁"; decoding drops that first space again.
  bool space_prefix = true;
  if (const json* value = gguf.find("tokenizer.ggml.add_space_prefix")) {
    if (!value->is_boolean()) fail("{}: GGUF metadata tokenizer.ggml.add_space_prefix must be a bool", spec.source);
    space_prefix = value->get<bool>();
  }
  if (space_prefix) {
    Normalizer prepend(NormalizerKind::Prepend);
    prepend.text = "\u2581";
    spec.normalizers.push_back(std::move(prepend));
  }
  Normalizer replace(NormalizerKind::Replace);
  replace.literal = " ";
  replace.text = "\u2581";
  spec.normalizers.push_back(std::move(replace));
  gguf_special_tokens(gguf, tokens, true, spec);
  SpmOptions options;
  options.text_start = space_prefix ? SpmTextStart::StripSpace : SpmTextStart::Keep;
  if (const json* unk = gguf.find("tokenizer.ggml.unknown_token_id")) {
    if (!unk->is_number_integer() || unk->get<int64_t>() < 0 || unk->get<int64_t>() >= static_cast<int64_t>(tokens.size()))
      fail("{}: GGUF metadata tokenizer.ggml.unknown_token_id must be a token id", spec.source);
    options.unk_id = static_cast<int32_t>(unk->get<int64_t>());
  }
  return std::make_shared<SpmBpeTokenizer>(std::move(spec), options);
}

// tokenizer.ggml.model "bert": WordPiece as llama.cpp's converter stores it, a "phantom space"
// vocabulary: a word-initial piece carries a leading U+2581, a continuation piece no "##", a
// control token (type 3) is as it was. Undone here into the vocabulary transformers has. The text
// is BertNormalizer'ed by the file's tokenizer.ggml.normalizer.* (llama.cpp's defaults: lowercase,
// strip accents as lowercase) and wrapped in BOS ([CLS]) ... SEP ([SEP]), as llama.cpp's WPM does.
std::shared_ptr<const Tokenizer> wordpiece_from_gguf(const GgufFile& gguf, const json& tokens, const json* types,
                                                     const std::string& source) {
  static const std::string kPhantom = "\xe2\x96\x81";
  WordPieceSpec spec;
  spec.source = source;
  spec.vocab.reserve(tokens.size());
  std::vector<std::string> pieces(tokens.size());  // each id's piece as transformers writes it
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::string& text = tokens[id].get_ref<const std::string&>();
    const int64_t type = types ? (*types)[id].get<int64_t>() : 1;
    const auto i = static_cast<int32_t>(id);
    pieces[id] = type == 3 ? text : text.rfind(kPhantom, 0) == 0 ? text.substr(kPhantom.size()) : "##" + text;
    spec.vocab.emplace(pieces[id], i);
    if (type == 3) spec.added_tokens.push_back({text, i, true});
  }
  auto flag = [&](const char* key, bool fallback) {
    const json* value = gguf.find(key);
    if (!value) return fallback;
    if (!value->is_boolean()) fail("{}: GGUF metadata {} must be a bool, found {}", source, key, value->type_name());
    return value->get<bool>();
  };
  auto token_id = [&](const char* key) {
    const json* id = gguf.find(key);
    if (!id) fail("{}: a WordPiece (\"bert\") vocabulary needs GGUF metadata {}", source, key);
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() >= static_cast<int64_t>(tokens.size()))
      fail("{}: GGUF metadata {} must be a token id 0..{}, found {}", source, key, tokens.size() - 1, id->dump());
    return static_cast<int32_t>(id->get<int64_t>());
  };
  BertNormalizerOptions normalizer;
  normalizer.lowercase = flag("tokenizer.ggml.normalizer.lowercase", true);
  normalizer.strip_accents = flag("tokenizer.ggml.normalizer.strip_accents", normalizer.lowercase);
  spec.normalizer = normalizer;
  const int32_t bos = token_id("tokenizer.ggml.bos_token_id"), sep = token_id("tokenizer.ggml.seperator_token_id");
  spec.unk_token = pieces[token_id("tokenizer.ggml.unknown_token_id")];
  spec.post_processor.prefix = {bos};
  spec.post_processor.suffix = {sep};
  spec.bos_token = pieces[bos];
  spec.eos_token = pieces[sep];
  return std::make_shared<WordPieceTokenizer>(std::move(spec));
}

// GGUF metadata is untrusted: every value is type-checked here so a wrong type is an Error that
// names the key, not a json type error from get<>().
std::shared_ptr<const Tokenizer> tokenizer_from_gguf(const std::filesystem::path& file) {
  GgufFile gguf = read_gguf(file);
  Spec spec;
  spec.source = file.string();
  auto get = [&](const char* key) -> const json& {
    const json* value = gguf.find(key);
    if (!value) fail("{}: GGUF metadata has no {}", spec.source, key);
    return *value;
  };
  auto string_of = [&](const char* key, const json& value) -> std::string {
    if (!value.is_string()) fail("{}: GGUF metadata {} must be a string, found {}", spec.source, key, value.type_name());
    return value.get<std::string>();
  };
  auto array_of = [&](const char* key) -> const json& {
    const json& value = get(key);
    if (!value.is_array()) fail("{}: GGUF metadata {} must be an array, found {}", spec.source, key, value.type_name());
    return value;
  };
  std::string model = string_of("tokenizer.ggml.model", get("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama" && model != "bert")
    fail("{}: tokenizer.ggml.model is {:?}; supported: \"gpt2\" (byte-level BPE), \"llama\" (SentencePiece BPE "
         "by scores) and \"bert\" (WordPiece); Unigram (\"t5\") and RWKV vocabularies are not", spec.source, model);
  const json& tokens = array_of("tokenizer.ggml.tokens");
  const json* types = gguf.find("tokenizer.ggml.token_type");
  if (types && (!types->is_array() || types->size() != tokens.size()))
    fail("{}: tokenizer.ggml.token_type must be an array with one entry per token", spec.source);
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].is_string())
      fail("{}: tokenizer.ggml.tokens[{}] must be a string, found {}", spec.source, id, tokens[id].type_name());
    std::string piece = tokens[id].get<std::string>();
    if (types && !(*types)[id].is_number_integer())
      fail("{}: tokenizer.ggml.token_type[{}] must be an integer, found {}", spec.source, id, (*types)[id].type_name());
    int64_t type = types ? (*types)[id].get<int64_t>() : 1;
    // llama.cpp token types: 1 normal, 2 unknown, 3 control (special), 4 user-defined (added, not
    // special), 5 unused, 6 byte.
    if (type == 3 || type == 4) spec.added_tokens.push_back({piece, static_cast<int32_t>(id), type == 3});
    else spec.vocab.emplace(piece, static_cast<int32_t>(id));
  }
  if (model == "llama") return spm_from_gguf(gguf, tokens, std::move(spec));
  if (model == "bert") return wordpiece_from_gguf(gguf, tokens, types, spec.source);
  const json& merges = array_of("tokenizer.ggml.merges");
  Fields f{spec.source};
  for (std::size_t i = 0; i < merges.size(); ++i) {
    if (!merges[i].is_string())
      fail("{}: tokenizer.ggml.merges[{}] must be a string, found {}", spec.source, i, merges[i].type_name());
    spec.merges.push_back(split_merge(f, merges[i].get<std::string>(), i));
  }
  std::string pre = gguf.find("tokenizer.ggml.pre") ? string_of("tokenizer.ggml.pre", get("tokenizer.ggml.pre")) : "gpt2";
  // smollm / starcoder: llama.cpp splits each digit off first, then applies GPT-2's pattern to what
  // lies between (tokenizer.json writes the same as Digits with individual_digits, then ByteLevel).
  const bool digits_first = pre == "smollm" || pre == "starcoder";
  const char* pattern = nullptr;
  if (pre == "gpt2" || pre == "gpt-2" || pre == "default" || digits_first) pattern = kGpt2Pattern;
  else if (pre == "qwen2") pattern = kQwen2Pattern;
  else if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") pattern = kLlama3Pattern;
  else if (pre == "gpt-4o") pattern = kO200kPattern;
  else fail("{}: tokenizer.ggml.pre {:?} is not supported (supported: gpt2, qwen2, llama-bpe, smollm, starcoder, gpt-4o)", spec.source, pre);
  if (digits_first) spec.pre_tokenizers.push_back(digit_split(true));
  PreTokenizerStep step{PreTokenizerStep::Kind::Split};
  step.regex = std::make_shared<Regex>(pattern);
  spec.pre_tokenizers.push_back(std::move(step));
  if (pre == "qwen2") spec.normalizers.push_back(NormalizerKind::NFC);
  if (pre == "llama-bpe" || pre == "llama3") spec.ignore_merges = true;
  gguf_special_tokens(gguf, tokens, false, spec);
  return std::make_shared<BpeTokenizer>(std::move(spec));
}
}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::from_folder(const std::filesystem::path& folder) {
  if (std::filesystem::exists(folder / "tokenizer.json")) return from_tokenizer_json(folder / "tokenizer.json");
  if (std::filesystem::exists(folder / "vocab.json") && std::filesystem::exists(folder / "merges.txt"))
    return from_vocab_merges(folder / "vocab.json", folder / "merges.txt");
  if (std::filesystem::exists(folder / "vocab.txt")) return wordpiece_from_vocab_txt(folder);
  fail("no tokenizer in {}: expected tokenizer.json, vocab.json and merges.txt, or a BERT vocab.txt", folder.string());
}

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::string& model) {
  std::filesystem::path path(model);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    if (path.extension() == ".gguf") return from_gguf(path);
    if (path.extension() == ".json") return from_tokenizer_json(path);
    fail("{}: expected a model folder, a tokenizer.json or a .gguf file", model);
  }
  return from_folder(std::filesystem::is_directory(path, ec) ? path : resolve_model_path(model));
}

}  // namespace inferlab
