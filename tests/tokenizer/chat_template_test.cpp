// Chat templates rendered byte-identically to @huggingface/jinja (Qwen3 and Qwen2.5-Instruct), and
// clear errors for what the interpreter does not support.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/tokenizer/chat_template.h"
#include "inferlab/util/error.h"
#include "test_paths.h"

namespace inferlab {
namespace {

TEST(ChatTemplate, MatchesHuggingFaceJinjaForEveryReferenceCase) {
  REQUIRE_PATH(test::reference_dir() / "chat_cases.json", "the Node reference");
  auto data = test::read_json(test::reference_dir() / "chat_cases.json");
  std::map<std::string, ChatTemplate> templates;
  for (auto& [name, source] : data["templates"].items()) templates.emplace(name, ChatTemplate(source.get<std::string>()));
  ASSERT_GE(data["cases"].size(), 40u);
  std::size_t index = 0;
  for (auto& c : data["cases"]) {
    const auto& chat = templates.at(c["template"].get<std::string>());
    std::string got = chat.render(c["messages"], c["add_generation_prompt"].get<bool>(), c["extra"]);
    EXPECT_EQ(got, c["expected"].get<std::string>())
        << "case " << index << " (" << c["template"].get<std::string>() << "): " << c["messages"].dump();
    ++index;
  }
}

std::string render(const std::string& source, const nlohmann::json& extra = nlohmann::json::object(),
                   const nlohmann::json& messages = nlohmann::json::array()) {
  return ChatTemplate(source).render(messages, false, extra);
}

TEST(ChatTemplate, ExpressionsFiltersTestsAndMethods) {
  EXPECT_EQ(render("{{ 'abc'[::-1] }}|{{ [1,2,3][1:] | join(',') }}|{{ 'a,b'.split(',') | length }}"), "cba|2,3|2");
  EXPECT_EQ(render("{{ '  x  '.strip() }}{{ 'xx'.lstrip('x') }}|{{ 'ab' ~ 1 }}|{{ 'AbC'.lower() }}{{ 'q' | upper }}"), "x|ab1|abcQ");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index0 }}{{ x }}{% if loop.first %}F{% elif loop.last %}L{% else %}-{% endif %}{% endfor %}"), "0aF1b-2cL");
  EXPECT_EQ(render("{{ x is defined }} {{ y is not defined }} {{ none is none }} {{ 'a' is string }}", {{"x", 1}}), "true true true true");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 4 not in [1,2] }} {{ {'k': 1}.k }} {{ d.get('z', 'dflt') }}", {{"d", nlohmann::json::object()}}), "true true 1 dflt");
  EXPECT_EQ(render("{{ u | default('fallback') }} {{ [3,1,2] | first }}{{ [3,1,2] | last }} {{ ' t ' | trim }}"), "fallback 32 t");
  EXPECT_EQ(render("{{ {'b': [1, 'x'], 'a': none} | tojson }}"), "{\"b\": [1, \"x\"], \"a\": null}");
  EXPECT_EQ(render("{{ 'hello world'.replace('o', '0') }} {{ 'x'.startswith('x') }} {{ 'x.py'.endswith(('.py', '.c')) }}"), "hell0 w0rld true true");
  EXPECT_EQ(render("{%- if true -%}\n  yes  \n{%- endif -%}\n"), "yes");
  EXPECT_EQ(render("a {# comment #} b"), "a  b");
  EXPECT_EQ(render("{% macro greet(name, p='!') %}hi {{ name }}{{ p }}{% endmacro %}{{ greet('bob') }}"), "hi bob!");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 3 }} {{ 1 if false else 2 }} {{ -3 | abs }}"), "3 1 8 2 3");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}), "a=1;b=2;");
  EXPECT_EQ(render("{{ m | selectattr('role', 'equalto', 'user') | list | length }}",
                   {{"m", nlohmann::json::array({{{"role", "user"}}, {{"role", "system"}}, {{"role", "user"}}})}}), "2");
}

TEST(ChatTemplate, RaiseExceptionBecomesAnError) {
  try {
    render("{{ raise_exception('Conversation roles must alternate') }}");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos) << e.what();
  }
}

std::string error_of(const std::string& source) {
  try {
    ChatTemplate t(source);
    t.render(nlohmann::json::array(), false);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Integers are 64-bit with Python's floor division and modulo; results that do not fit are errors
// (they were undefined behaviour: the fuzzer's `{{ 9898000**99990 }}` cast inf to int64).
TEST(ChatTemplate, IntegerArithmeticIsPythonsOrAnErrorWhenItOverflows) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 // -2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 62 }} {{ (-3) ** 3 }} {{ 0 ** 0 }}"),
            "3 -4 -4 1 2 -2 4611686018427387904 -27 1");
  EXPECT_EQ(render("{{ 9007199254740993 // 1 }} {{ -9223372036854775807 - 1 }} {{ (-9223372036854775807 - 1) % -1 }}"),
            "9007199254740993 -9223372036854775808 0");
  EXPECT_EQ(render("{{ 'abcdef'[1::9223372036854775807] }}|{{ range(9223372036854775806, 9223372036854775807, 5) | list | length }}"), "b|1");
  EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ '' * 9223372036854775807 }}|{{ 'x' * -2 }}"), "ababab||");
  for (const char* source : {"{{ 9898000 ** 99990 }}", "{{ 2 ** 63 }}", "{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
                             "{{ 4611686018427387904 * 2 }}", "{{ (-9223372036854775807 - 1) // -1 }}", "{{ -(-9223372036854775807 - 1) }}",
                             "{{ (-9223372036854775807 - 1) | abs }}"}) {
    std::string e = error_of(source);
    EXPECT_NE(e.find("integer overflow"), std::string::npos) << source << ": " << e;
  }
  EXPECT_NE(error_of("{{ (10.0 ** 300) | int }}").find("does not fit a 64-bit integer"), std::string::npos);
  EXPECT_NE(error_of("{{ 'ab' * 9223372036854775807 }}").find("larger than 16 MiB"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 // 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 % 0 }}").find("division by zero"), std::string::npos);
  EXPECT_EQ(ChatTemplate("{{ messages[0].n }}").render(nlohmann::json::parse(R"([{"n": 18446744073709551615}])"), false), "18446744073709551616.0");
}

// Namespaces and lists are shared and mutable: storing one inside itself would be a reference
// cycle (the fuzzer found `{% set ns.n = ns %}` leaking), so it is an error.
TEST(ChatTemplate, AContainerCannotBeStoredInsideItself) {
  for (const char* source : {"{% set ns = namespace(n=0) %}{% set ns.n = ns %}", "{% set ns = namespace(n=0) %}{% set ns.n = [1, {'k': ns}] %}",
                             "{% set l = [] %}{{ l.append(l) }}", "{% set l = [] %}{{ l.append([[l]]) }}"}) {
    EXPECT_NE(error_of(source).find("itself"), std::string::npos) << source << ": " << error_of(source);
  }
  EXPECT_EQ(render("{% set a = namespace(n=1) %}{% set b = namespace(n=a) %}{% set l = [] %}{{ l.append([1]) }}{{ l.append(l[0]) }}{{ b.n.n }}{{ l | length }}"), "12");
}

// Inputs that crashed the interpreter (a null function called, SIGFPE, an uncaught length_error,
// a macro reading a scope that had ended) render or fail with an Error.
TEST(ChatTemplate, FormerCrashesRenderOrFailCleanly) {
  EXPECT_NE(error_of("{{ namespace(a=1) | items }}").find("filter 'items' needs a dict"), std::string::npos);
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) is divisibleby(-1) }} {{ 7 is divisibleby(-1) }} {{ 7 is divisibleby(-2) }}"),
            "true true false");
  EXPECT_NE(error_of("{{ 'a' | indent(9223372036854775807) }}").find("larger than 16 MiB"), std::string::npos);
  EXPECT_NE(error_of("{{ [1] | tojson(indent=2000000000) }}").find("larger than 16 MiB"), std::string::npos);
  EXPECT_EQ(render("{{ 'a\nb' | indent(width=3) }}|{{ [1] | tojson(indent=1) }}"), "a\n   b|[\n 1\n]");
  // A macro defined in a loop body or another macro may be stored where it outlives that scope;
  // it runs while the scope lasts, and is an error after.
  const std::string stored = "{% set ns = namespace() %}{% for i in [7] %}{% macro m() %}i={{ i }}{% endmacro %}{% set ns.f = m %}"
                             "{{ ns.f() }}{% endfor %}";
  EXPECT_EQ(render(stored), "i=7");
  EXPECT_NE(error_of(stored + "{{ ns.f() }}").find("macro m is called after the block that defined it ended"), std::string::npos);
  EXPECT_NE(error_of("{% set l = [] %}{% macro outer() %}{% macro inner() %}x{% endmacro %}{{ l.append(inner) }}{% endmacro %}"
                     "{{ outer() }}{{ l[0]() }}").find("after the block"), std::string::npos);
}

// Lines are counted incrementally while lexing; errors far into a long template, inside a tag that
// spans lines, still name the right one.
TEST(ChatTemplate, ErrorsLateInALongTemplateNameTheirLine) {
  std::string source;
  for (int k = 0; k < 500; ++k) source += "{{ messages | length }} text {# note\n #}\n";
  EXPECT_NE(error_of(source + "{{ x\n | frobnicate }}").find("line 1002"), std::string::npos);
  EXPECT_NE(error_of(source + "\n{{ 'unterminated }}").find("line 1002"), std::string::npos);
}

TEST(ChatTemplate, UnsupportedConstructsNameTheConstructAndLine) {
  std::string e = error_of("line one\n{% include 'other.j2' %}");
  EXPECT_NE(e.find("include"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2"), std::string::npos) << e;
  e = error_of("{{ x | frobnicate }}");
  EXPECT_NE(e.find("frobnicate"), std::string::npos) << e;
  e = error_of("\n\n{{ x is frobnicated }}");
  EXPECT_NE(e.find("frobnicated"), std::string::npos) << e;
  EXPECT_NE(e.find("line 3"), std::string::npos) << e;
  e = error_of("{% if x %}never closed");
  EXPECT_NE(e.find("endif"), std::string::npos) << e;
  e = error_of("{{ 'unterminated }}");
  EXPECT_NE(e.find("string literal"), std::string::npos) << e;
  e = error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}");
  EXPECT_NE(e.find("nesting"), std::string::npos) << e;
  // Long operator, filter and attribute chains nest as deeply (the fuzzer overflowed the stack
  // with `99*9/9*...` 2000 operators long).
  for (const std::string& link : {std::string("*9"), std::string("|trim"), std::string(".a"), std::string(" and x"), std::string("[0]")}) {
    std::string chain = "{{ x";
    for (int k = 0; k < 5000; ++k) chain += link;
    e = error_of(chain + " }}");
    EXPECT_NE(e.find("nesting"), std::string::npos) << link << ": " << e;
  }
  EXPECT_EQ(render("{{ 1" + [] { std::string c; for (int k = 0; k < 100; ++k) c += " + 1"; return c; }() + " }}"), "101");
  e = error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}");
  EXPECT_NE(e.find("recurses"), std::string::npos) << e;
  e = error_of("{{ 99999999999999999999999 }}");
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  e = error_of("{% for x in y recursive %}{% endfor %}");
  EXPECT_NE(e.find("recursive"), std::string::npos) << e;
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// Mutated real templates and random tag soup: each either renders or throws Error, never crashes.
TEST(ChatTemplate, MutatedTemplatesRenderOrFailCleanly) {
  REQUIRE_PATH(test::reference_dir() / "chat_cases.json", "the Node reference");
  auto data = test::read_json(test::reference_dir() / "chat_cases.json");
  std::vector<std::string> sources;
  for (auto& [name, source] : data["templates"].items()) sources.push_back(source.get<std::string>());
  const std::vector<std::string> fragments = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "'", "\"",
                                              "|", ".", ",", "if", "for", "endfor", "endif", "set", "in", "not",
                                              "loop", "messages", "[::-1]", "namespace(", "\\", "\n", " "};
  auto messages = nlohmann::json::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                             {"role": "assistant", "content": "<think>\nx\n</think>\n\na"}])");
  std::mt19937 rng(2024);
  int rendered = 0, rejected = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string source = sources[rng() % sources.size()];
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits && !source.empty(); ++e) {
      std::size_t at = rng() % source.size();
      switch (rng() % 3) {
        case 0: source.erase(at, 1 + rng() % 8); break;
        case 1: source.insert(at, fragments[rng() % fragments.size()]); break;
        default: source[at] = static_cast<char>(rng() % 256);
      }
    }
    try {
      ChatTemplate(source).render(messages, rng() % 2, {{"tools", nlohmann::json::array()}});
      ++rendered;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rendered, 0);
  EXPECT_GT(rejected, 0);
}

// One render's work is bounded: a million statements, 64 MiB of output (the loops run over what a
// request sends, so a request cannot make a render run on).
TEST(ChatTemplate, ARenderHasAStepAndAnOutputBudget) {
  EXPECT_EQ(render("{% for i in range(3) %}{% for j in range(3) %}x{% endfor %}{% endfor %}"), "xxxxxxxxx");
  EXPECT_NE(error_of("{% for i in range(2000) %}{% for j in range(1000) %}{% set k = j %}{% endfor %}{% endfor %}")
                .find("chat template line 1: the render took more than 1000000 steps"),
            std::string::npos);
  EXPECT_NE(error_of("{% for i in range(8) %}{{ 'x' * 10000000 }}{% endfor %}").find("the output is larger than 64 MiB"),
            std::string::npos);
}

}  // namespace
}  // namespace inferlab
