// Builds BpeTokenizer from the three on-disk forms: tokenizer.json, vocab.json + merges.txt, GGUF.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "inferlab/util/error.h"
#include "inferlab/loading/gguf.h"
#include "inferlab/util/model_path.h"
#include "tokenizer/bpe_tokenizer.h"

namespace inferlab {

using nlohmann::json;
using namespace tokenizer_detail;

namespace {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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

void parse_normalizer(const Fields& f, const json& node, std::vector<NormalizerKind>& out, int depth = 0) {
  if (node.is_null()) return;
  if (depth > 32) fail("{}: normalizer Sequences nested deeper than 32 levels", f.source);
  if (!node.is_object()) fail("{}: normalizer must be an object or null", f.source);
  std::string type = f.string(node, "type", "normalizer");
  if (type == "NFC") out.push_back(NormalizerKind::NFC);
  else if (type == "NFD") out.push_back(NormalizerKind::NFD);
  else if (type == "NFKC") out.push_back(NormalizerKind::NFKC);
  else if (type == "NFKD") out.push_back(NormalizerKind::NFKD);
  else if (type == "Lowercase") out.push_back(NormalizerKind::Lowercase);
  else if (type == "Sequence") {
    auto it = node.find("normalizers");
    if (it == node.end() || !it->is_array()) fail("{}: normalizer Sequence needs a normalizers array", f.source);
    for (const json& child : *it) parse_normalizer(f, child, out, depth + 1);
  } else {
    fail("{}: normalizer type {:?} is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Sequence)", f.source, type);
  }
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
  } else if (type == "Split") {
    PreTokenizerStep step{PreTokenizerStep::Kind::Split};
    const json& pattern = f.object(node, "pattern", "pre_tokenizer(Split)");
    if (pattern.contains("Regex")) step.regex = std::make_shared<Regex>(f.string(pattern, "Regex", "pre_tokenizer(Split).pattern"));
    else if (pattern.contains("String")) step.regex = std::make_shared<Regex>(regex_escape(f.string(pattern, "String", "pre_tokenizer(Split).pattern")));
    else fail("{}: pre_tokenizer(Split).pattern needs Regex or String", f.source);
    step.behavior = parse_behavior(f, f.string(node, "behavior", "pre_tokenizer(Split)"));
    step.invert = f.boolean(node, "invert", false, "pre_tokenizer(Split)");
    out.push_back(std::move(step));
  } else {
    fail("{}: pre_tokenizer type {:?} is not supported (supported: ByteLevel, Split, Sequence)", f.source, type);
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

// tokenizer_config.json next to the tokenizer: chat template, BOS/EOS names, added tokens.
void apply_tokenizer_config(const std::filesystem::path& folder, Spec& spec, bool take_added_tokens) {
  std::filesystem::path file = folder / "tokenizer_config.json";
  if (!std::filesystem::exists(file)) return;
  json config = read_json(file);
  if (!config.is_object()) fail("{}: must be a JSON object", file.string());
  if (auto it = config.find("chat_template"); it != config.end()) {
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
      spec.added_tokens.push_back(added);
    }
  }
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
  if (type != "BPE") fail("{}: model type {:?} is not supported (only byte-level BPE)", spec.source, type);
  if (f.boolean(model, "byte_fallback", false, "model"))
    fail("{}: model.byte_fallback is true (SentencePiece-style BPE); only byte-level BPE is supported", spec.source);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      fail("{}: model.{} is set; only byte-level BPE without subword affixes is supported", spec.source, key);
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
  if (auto added = root.find("added_tokens"); added != root.end() && !added->is_null()) {
    if (!added->is_array()) fail("{}: added_tokens must be an array", spec.source);
    for (const json& token : *added) {
      if (!token.is_object()) fail("{}: each added_tokens entry must be an object", spec.source);
      AddedToken t;
      t.id = f.id(token.contains("id") ? token["id"] : json(), "added_tokens[].id");
      t.content = f.string(token, "content", "added_tokens[]");
      t.special = f.boolean(token, "special", false, "added_tokens[]");
      t.lstrip = f.boolean(token, "lstrip", false, "added_tokens[]");
      t.rstrip = f.boolean(token, "rstrip", false, "added_tokens[]");
      t.single_word = f.boolean(token, "single_word", false, "added_tokens[]");
      spec.added_tokens.push_back(std::move(t));
    }
  }
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
  return std::make_shared<BpeTokenizer>(std::move(spec));
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
  if (model != "gpt2")
    fail("{}: tokenizer.ggml.model is {:?}; only byte-level BPE (\"gpt2\") is supported", spec.source, model);
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
    // llama.cpp token types: 3 control (special), 4 user-defined (added, not special).
    if (type == 3 || type == 4) spec.added_tokens.push_back({piece, static_cast<int32_t>(id), type == 3});
    else spec.vocab.emplace(piece, static_cast<int32_t>(id));
  }
  const json& merges = array_of("tokenizer.ggml.merges");
  Fields f{spec.source};
  for (std::size_t i = 0; i < merges.size(); ++i) {
    if (!merges[i].is_string())
      fail("{}: tokenizer.ggml.merges[{}] must be a string, found {}", spec.source, i, merges[i].type_name());
    spec.merges.push_back(split_merge(f, merges[i].get<std::string>(), i));
  }
  std::string pre = gguf.find("tokenizer.ggml.pre") ? string_of("tokenizer.ggml.pre", get("tokenizer.ggml.pre")) : "gpt2";
  const char* pattern = nullptr;
  if (pre == "gpt2" || pre == "gpt-2" || pre == "default") pattern = kGpt2Pattern;
  else if (pre == "qwen2") pattern = kQwen2Pattern;
  else if (pre == "llama-bpe" || pre == "llama3" || pre == "smaug-bpe") pattern = kLlama3Pattern;
  else fail("{}: tokenizer.ggml.pre {:?} is not supported (supported: gpt2, qwen2, llama-bpe)", spec.source, pre);
  PreTokenizerStep step{PreTokenizerStep::Kind::Split};
  step.regex = std::make_shared<Regex>(pattern);
  spec.pre_tokenizers.push_back(std::move(step));
  if (pre == "qwen2") spec.normalizers.push_back(NormalizerKind::NFC);
  if (pre == "llama-bpe" || pre == "llama3") spec.ignore_merges = true;
  // Special token ids: absent is fine; present but not an id of this vocabulary is an error.
  auto token_id = [&](const char* key) -> std::optional<int32_t> {
    const json* id = gguf.find(key);
    if (!id) return std::nullopt;
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() >= static_cast<int64_t>(tokens.size()))
      fail("{}: GGUF metadata {} must be a token id 0..{}, found {}", spec.source, key, tokens.size() - 1, id->dump());
    return static_cast<int32_t>(id->get<int64_t>());
  };
  if (auto bos = token_id("tokenizer.ggml.bos_token_id")) spec.bos_token = tokens[*bos].get<std::string>();
  if (auto eos = token_id("tokenizer.ggml.eos_token_id")) spec.eos_token = tokens[*eos].get<std::string>();
  if (const json* add_bos = gguf.find("tokenizer.ggml.add_bos_token")) {
    if (!add_bos->is_boolean())
      fail("{}: GGUF metadata tokenizer.ggml.add_bos_token must be a bool, found {}", spec.source, add_bos->type_name());
    if (add_bos->get<bool>()) {
      auto bos = token_id("tokenizer.ggml.bos_token_id");
      if (!bos) fail("{}: GGUF metadata tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id", spec.source);
      spec.post_processor.prefix.push_back(*bos);
    }
  }
  if (const json* chat = gguf.find("tokenizer.chat_template")) spec.chat_template = string_of("tokenizer.chat_template", *chat);
  return std::make_shared<BpeTokenizer>(std::move(spec));
}
}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::from_folder(const std::filesystem::path& folder) {
  if (std::filesystem::exists(folder / "tokenizer.json")) return from_tokenizer_json(folder / "tokenizer.json");
  if (std::filesystem::exists(folder / "vocab.json") && std::filesystem::exists(folder / "merges.txt"))
    return from_vocab_merges(folder / "vocab.json", folder / "merges.txt");
  fail("no tokenizer in {}: expected tokenizer.json, or vocab.json and merges.txt", folder.string());
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
