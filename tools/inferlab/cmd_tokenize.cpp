// `inferlab tokenize MODEL TEXT...`: ids and pieces per text, as the course prints them;
// `--chat` renders the chat template around the texts first.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {

// Python's repr() of a str, for printable output identical to the course's print().
std::string python_repr(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\' || c == static_cast<unsigned char>(quote)) out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + quote;
}

void print_encoding(const inferlab::Tokenizer& tokenizer, const std::string& text, const std::vector<int32_t>& ids) {
  std::string line = text + " [";
  for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
  line += "] [";
  for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + python_repr(tokenizer.id_to_piece(ids[i]));
  line += "]";
  std::printf("%s\n", line.c_str());
}

}  // namespace

static inferlab::cli::Registrar reg([](CLI::App& app) {
  struct Options {
    std::string model;
    std::vector<std::string> texts;
    bool chat = false, add_special = false;
    std::string cases, chat_cases;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print token ids and pieces for each text (or render the chat template)");
  cmd->add_option("model", options->model, "Model folder, tokenizer.json, .gguf file, or HF repo id")->required();
  cmd->add_option("texts", options->texts, "Texts to tokenize");
  cmd->add_flag("--chat", options->chat, "Render the chat template with the texts as user messages (add_generation_prompt) and tokenize the result");
  cmd->add_flag("--add-special-tokens", options->add_special, "Apply the post-processor (e.g. BOS)");
  cmd->add_option("--cases", options->cases, "JSON file holding an array of strings: print one JSON array of ids per case (machine-readable)");
  cmd->add_option("--chat-cases", options->chat_cases,
                  "JSON file holding an array of {\"messages\": [...], \"add_generation_prompt\": bool, \"kwargs\": {...}} (kwargs: "
                  "the template's other variables, e.g. tools, enable_thinking): print one JSON array of the rendered chat "
                  "templates (machine-readable)");
  cmd->callback([options] {
    auto tokenizer = inferlab::Tokenizer::load(options->model);
    auto read_array = [](const std::string& file) {
      std::ifstream in(file, std::ios::binary);
      if (!in) inferlab::fail("cannot open {}", file);
      nlohmann::ordered_json cases;
      try {
        cases = nlohmann::ordered_json::parse(in);  // keys in the file's order, as transformers reads them
      } catch (const nlohmann::json::exception& e) {
        inferlab::fail("{} is not valid JSON: {}", file, e.what());
      }
      if (!cases.is_array()) inferlab::fail("{} must hold a JSON array", file);
      return cases;
    };
    if (!options->chat_cases.empty()) {
      if (tokenizer->chat_template().empty()) inferlab::fail("{} has no chat template", options->model);
      inferlab::ChatTemplate chat_template(tokenizer->chat_template());
      nlohmann::ordered_json extra = {{"bos_token", tokenizer->bos_token()}, {"eos_token", tokenizer->eos_token()}};
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : read_array(options->chat_cases)) {
        if (!c.is_object() || !c.contains("messages") || !c["messages"].is_array())
          inferlab::fail("{}: every case must be an object with a \"messages\" array, got {}", options->chat_cases, c.dump());
        if (c.contains("add_generation_prompt") && !c["add_generation_prompt"].is_boolean())
          inferlab::fail("{}: add_generation_prompt must be true or false, got {}", options->chat_cases, c["add_generation_prompt"].dump());
        const bool generation_prompt = c.value("add_generation_prompt", true);
        nlohmann::ordered_json variables = extra;
        if (c.contains("kwargs")) {
          if (!c["kwargs"].is_object()) inferlab::fail("{}: kwargs must be an object, got {}", options->chat_cases, c["kwargs"].dump());
          for (const auto& [key, value] : c["kwargs"].items()) variables[key] = value;
        }
        out.push_back(chat_template.render(c["messages"], generation_prompt, variables));
      }
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    if (!options->cases.empty()) {
      const nlohmann::json cases = read_array(options->cases);
      nlohmann::json out = nlohmann::json::array();
      for (const auto& c : cases) {
        if (!c.is_string()) inferlab::fail("{}: every case must be a string, got {}", options->cases, c.dump());
        out.push_back(tokenizer->encode(c.get<std::string>(), options->add_special));
      }
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    if (options->texts.empty()) inferlab::fail("give at least one text to tokenize (or --cases FILE)");
    if (options->chat) {
      if (tokenizer->chat_template().empty()) inferlab::fail("{} has no chat template (tokenizer_config.json chat_template)", options->model);
      inferlab::ChatTemplate chat_template(tokenizer->chat_template());
      nlohmann::json messages = nlohmann::json::array();
      for (const auto& text : options->texts) messages.push_back({{"role", "user"}, {"content", text}});
      nlohmann::json extra = {{"bos_token", tokenizer->bos_token()}, {"eos_token", tokenizer->eos_token()}};
      std::string rendered = chat_template.render(messages, true, extra);
      std::printf("%s\n", rendered.c_str());
      print_encoding(*tokenizer, python_repr(rendered), tokenizer->encode(rendered, options->add_special));
      return;
    }
    for (const auto& text : options->texts) print_encoding(*tokenizer, text, tokenizer->encode(text, options->add_special));
  });
});
