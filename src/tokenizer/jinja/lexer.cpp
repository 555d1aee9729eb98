#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/text.h"
#include "tokenizer/utf8.h"

namespace inferlab::jinja {
namespace {

// The 1-based line of a position. The lexer asks in increasing order, so newlines are counted
// from the previous answer on: counting from the start each time made lexing quadratic in the
// template's length (a 4 KB template cost tens of milliseconds).
class LineCounter {
 public:
  explicit LineCounter(const std::string& src) : src_(src) {}
  int operator()(std::size_t pos) {
    pos = std::min(pos, src_.size());
    if (pos < counted_to_) counted_to_ = 0, line_ = 1;
    line_ += static_cast<int>(std::count(src_.begin() + counted_to_, src_.begin() + pos, '\n'));
    counted_to_ = pos;
    return line_;
  }

 private:
  const std::string& src_;
  std::size_t counted_to_ = 0;
  int line_ = 1;
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// The string literal from src[pos] (just past the opening quote) to its closing quote, escapes
// decoded; pos ends past the closing quote.
std::string read_string(const std::string& src, std::size_t& pos, char quote, int here) {
  std::string value;
  while (true) {
    if (pos >= src.size()) fail("chat template line {}: string literal is never closed", here);
    char d = src[pos++];
    if (d == quote) return value;
    if (d != '\\') { value += d; continue; }
    if (pos >= src.size()) fail("chat template line {}: string literal is never closed", here);
    char e = src[pos++];
    switch (e) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case 'b': value += '\b'; break;
      case 'f': value += '\f'; break;
      case 'v': value += '\v'; break;
      case '\'': case '"': case '\\': value += e; break;
      case 'x': case 'u': {
        std::size_t len = e == 'x' ? 2 : 4;
        std::string hex = src.substr(pos, len);
        if (hex.size() != len || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
          fail("chat template line {}: invalid escape \\{}{}", here, e, hex);
        utf8::append(value, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
        pos += len;
        break;
      }
      default: fail("chat template line {}: unknown escape \\{} in a string literal", here, e);
    }
  }
}

}  // namespace

std::vector<Token> lex(const std::string& source) {
  std::string src = source;
  if (!src.empty() && src.back() == '\n') src.pop_back();
  std::vector<Token> tokens;
  std::size_t pos = 0;
  LineCounter line_at(src);
  auto push_text = [&](std::size_t begin, std::size_t end) {
    if (end > begin) tokens.push_back({Tok::Text, src.substr(begin, end - begin), line_at(begin)});
  };
  auto strip_previous_text = [&] {
    if (!tokens.empty() && tokens.back().type == Tok::Text) {
      tokens.back().text = trim_right(tokens.back().text);
      if (tokens.back().text.empty()) tokens.pop_back();
    }
  };
  // lstrip_blocks: spaces and tabs before a block or comment tag are dropped when they start a
  // line of the original template (the newline itself may already be gone through trim_blocks).
  std::size_t text_begin = 0;
  auto lstrip_previous_text = [&] {
    if (tokens.empty() || tokens.back().type != Tok::Text) return;
    std::string& t = tokens.back().text;
    std::size_t k = t.size();
    while (k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t')) --k;
    if (k == t.size()) return;
    bool line_start = k > 0 ? (t[k - 1] == '\n' || t[k - 1] == '\r')
                            : (text_begin == 0 || src[text_begin - 1] == '\n' || src[text_begin - 1] == '\r');
    if (!line_start) return;
    t.erase(k);
    if (t.empty()) tokens.pop_back();
  };
  auto skip_ws = [&] {
    while (pos < src.size() && is_ws(src[pos])) ++pos;
  };
  while (pos < src.size()) {
    // Text up to the next tag.
    std::size_t end = pos;
    while (true) {
      end = src.find('{', end);
      if (end == std::string::npos) { end = src.size(); break; }
      if (end + 1 < src.size() && (src[end + 1] == '%' || src[end + 1] == '{' || src[end + 1] == '#')) break;
      ++end;
    }
    push_text(pos, end);
    text_begin = pos;
    pos = end;
    if (pos >= src.size()) break;
    char kind = src[pos + 1];
    bool strip_before = pos + 2 < src.size() && src[pos + 2] == '-';
    int line = line_at(pos);
    if (kind == '#') {
      std::size_t close = src.find("#}", pos + 2);
      if (close == std::string::npos) fail("chat template line {}: comment {{# is never closed with #}}", line);
      if (strip_before) strip_previous_text();
      else lstrip_previous_text();
      bool strip_after = close > pos + 2 && src[close - 1] == '-';
      pos = close + 2;
      if (strip_after) skip_ws();
      else if (pos < src.size() && src[pos] == '\n') ++pos;  // trim_blocks
      tokens.push_back({Tok::Comment, "", line});
      continue;
    }
    if (strip_before) strip_previous_text();
    else if (kind == '%') lstrip_previous_text();
    tokens.push_back({kind == '%' ? Tok::OpenStmt : Tok::OpenExpr, "", line});
    pos += strip_before ? 3 : 2;
    // Tokens inside the tag.
    while (true) {
      skip_ws();
      if (pos >= src.size()) fail("chat template line {}: tag opened here is never closed", line);
      int here = line_at(pos);
      char c = src[pos];
      if (c == '-' && (src.compare(pos, 3, "-%}") == 0 || src.compare(pos, 3, "-}}") == 0)) {
        bool statement = src[pos + 1] == '%';
        tokens.push_back({statement ? Tok::CloseStmt : Tok::CloseExpr, "", here});
        pos += 3;
        skip_ws();
        break;
      }
      if (src.compare(pos, 2, "%}") == 0 || src.compare(pos, 2, "}}") == 0) {
        bool statement = c == '%';
        // "}}" closes an expression only at bracket depth 0; a dict literal's "}" "}" is rare enough
        // in chat templates that, like @huggingface/jinja, it is read as the end of the tag.
        tokens.push_back({statement ? Tok::CloseStmt : Tok::CloseExpr, "", here});
        pos += 2;
        if (statement && pos < src.size() && src[pos] == '\n') ++pos;  // trim_blocks
        break;
      }
      if (c == '\'' || c == '"') {
        ++pos;
        tokens.push_back({Tok::String, read_string(src, pos, c, here), here});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t start = pos;
        while (pos < src.size() && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
        if (pos + 1 < src.size() && src[pos] == '.' && std::isdigit(static_cast<unsigned char>(src[pos + 1]))) {
          ++pos;
          while (pos < src.size() && std::isdigit(static_cast<unsigned char>(src[pos]))) ++pos;
        }
        tokens.push_back({Tok::Number, src.substr(start, pos - start), here});
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t start = pos;
        while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
        tokens.push_back({Tok::Name, src.substr(start, pos - start), here});
        continue;
      }
      static const std::pair<const char*, Tok> symbols[] = {
          {"**", Tok::Op}, {"//", Tok::Op}, {"==", Tok::Op}, {"!=", Tok::Op}, {"<=", Tok::Op}, {">=", Tok::Op},
          {"(", Tok::LParen}, {")", Tok::RParen}, {"[", Tok::LBracket}, {"]", Tok::RBracket}, {"{", Tok::LBrace},
          {"}", Tok::RBrace}, {",", Tok::Comma}, {".", Tok::Dot}, {":", Tok::Colon}, {"|", Tok::Pipe},
          {"<", Tok::Op}, {">", Tok::Op}, {"+", Tok::Op}, {"-", Tok::Op}, {"~", Tok::Op}, {"*", Tok::Op},
          {"/", Tok::Op}, {"%", Tok::Op}, {"=", Tok::Assign}};
      bool matched = false;
      for (const auto& [text, type] : symbols) {
        std::size_t n = std::char_traits<char>::length(text);
        if (src.compare(pos, n, text) == 0) {
          tokens.push_back({type, text, here});
          pos += n;
          matched = true;
          break;
        }
      }
      if (!matched) fail("chat template line {}: unexpected character {:?}", here, std::string(1, c));
    }
  }
  tokens.push_back({Tok::End, "", line_at(src.size())});
  return tokens;
}

}  // namespace inferlab::jinja
