// The Jinja builtins and text helpers on values directly: filters, tests, methods, and the UTF-8
// case mappings (characters utf8proc does not decode pass through unchanged).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/text.h"

namespace inferlab::jinja {
namespace {

Value json_value(const char* text) { return from_json(nlohmann::json::parse(text)); }

Value filter(const std::string& name, const Value& v, std::vector<Value> args = {}, Kwargs kwargs = {}) {
  return apply_filter(7, name, v, args, kwargs);
}

std::string filter_error(const std::string& name, const Value& v, std::vector<Value> args = {}, Kwargs kwargs = {}) {
  try {
    filter(name, v, std::move(args), std::move(kwargs));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Value call_method(const Value& object, const std::string& name, std::vector<Value> args = {}) {
  Value method = member(1, object, Value::string(name));
  EXPECT_EQ(method.kind, Value::Kind::Function) << name;
  Kwargs kwargs;
  return (*method.function)(args, kwargs);
}

TEST(JinjaText, CaseMappingByCodePoint) {
  EXPECT_EQ(to_upper("abc é ǆ"), "ABC É Ǆ");
  EXPECT_EQ(to_lower("ÀB\xff" "C"), "àb\xff" "c");          // an invalid byte passes through
  EXPECT_EQ(capitalize("hELLO wORLD"), "Hello world");
  EXPECT_EQ(capitalize("\xff" "abc"), "\xff" "abc");          // the invalid byte is the first character
  EXPECT_EQ(title_case("hello wORLD-x 2nd o'neil"), "Hello World-X 2Nd O'Neil");
  EXPECT_EQ(title_case("a\xff" "b"), "A\xff" "b");            // an invalid byte does not start a word
  EXPECT_EQ(characters("aé\xff" "z").size(), 4u);
  EXPECT_EQ(trim_right(trim_left("\xe3\x80\x80 x \xc2\xa0")), "x");  // JavaScript's trim() set
  EXPECT_EQ(replace_all("aaaa", "a", "b", 2), "bbaa");
  EXPECT_EQ(replace_all("abc", "", "x", -1), "abc");
}

TEST(JinjaBuiltins, FiltersOnValues) {
  Value list = json_value(R"([{"role": "user", "n": 2}, {"role": "system", "n": 1}, {"role": "user", "n": 3}])");
  EXPECT_EQ(to_string(filter("map", list, {}, {{{"attribute", Value::string("role")}}})), "[\"user\", \"system\", \"user\"]");
  EXPECT_EQ(to_string(filter("selectattr", list, {Value::string("role"), Value::string("equalto"), Value::string("user")})),
            "[{\"n\": 2, \"role\": \"user\"}, {\"n\": 3, \"role\": \"user\"}]");  // JSON objects arrive key-sorted
  EXPECT_EQ(to_string(filter("sort", list, {}, {{{"attribute", Value::string("n")}, {"reverse", Value::boolean(true)}}})),
            "[{\"n\": 3, \"role\": \"user\"}, {\"n\": 2, \"role\": \"user\"}, {\"n\": 1, \"role\": \"system\"}]");
  EXPECT_EQ(to_string(filter("join", json_value("[1, \"a\", null]"), {Value::string("-")})), "1-a-null");
  Value dict = Value::dict({{"b", Value::integer(1)}, {"a", Value::integer(2)}});  // insertion-ordered
  EXPECT_EQ(to_string(filter("dictsort", dict)), "[[\"a\", 2], [\"b\", 1]]");
  EXPECT_EQ(to_string(filter("items", dict)), "[[\"b\", 1], [\"a\", 2]]");
  EXPECT_EQ(to_string(filter("list", Value::string("aé"))), "[\"a\", \"é\"]");
  EXPECT_EQ(to_string(filter("list", json_value(R"({"k": 1})"))), "[\"k\"]");
  EXPECT_EQ(to_string(filter("list", Value::integer(3))), "[]");
  EXPECT_EQ(to_string(filter("wordcount", Value::string(" two\u3000words "))), "2");
  EXPECT_EQ(to_string(filter("title", Value::string("ab cd"))), "Ab Cd");
  EXPECT_EQ(to_string(filter("min", json_value("[3, 1.5, 2]"))), "1.5");
  EXPECT_EQ(to_string(filter("max", json_value("[\"b\", \"c\", \"a\"]"))), "c");
  EXPECT_EQ(to_string(filter("indent", Value::string("a\n\nb"), {Value::integer(2)})), "a\n\n  b");
  EXPECT_EQ(to_string(filter("tojson", json_value("[1, {\"a\": []}]"), {Value::integer(1)})), "[\n 1,\n {\n  \"a\": []\n }\n]");
  EXPECT_EQ(filter_error("upper", Value::integer(1)), "chat template line 7: filter 'upper' needs a string");
  EXPECT_EQ(filter_error("frobnicate", Value::integer(1)), "chat template line 7: the Jinja filter 'frobnicate' is not supported");
}

TEST(JinjaBuiltins, TestsAndContainment) {
  EXPECT_TRUE(apply_test(1, "divisibleby", Value::integer(9), {Value::integer(3)}));
  EXPECT_FALSE(apply_test(1, "divisibleby", Value::integer(9), {Value::integer(0)}));
  EXPECT_TRUE(apply_test(1, "in", Value::string("b"), {Value::string("abc")}));
  EXPECT_TRUE(apply_test(1, "lower", Value::string("ab1"), {}));
  EXPECT_FALSE(apply_test(1, "upper", Value::string("aB"), {}));
  EXPECT_EQ(contains(Value::integer(1), Value::integer(1)), std::nullopt);
  EXPECT_EQ(contains(Value::string("abc"), Value::integer(1)), std::nullopt);
  EXPECT_EQ(contains(json_value(R"({"k": 1})"), Value::string("k")), true);
  EXPECT_EQ(contains(json_value("[1, 2.0]"), Value::integer(2)), true);
  EXPECT_EQ(elements(Value::none()), std::nullopt);
}

TEST(JinjaBuiltins, MethodsAndItems) {
  Value s = Value::string("a,b,,c");
  EXPECT_EQ(to_string(call_method(s, "split", {Value::string(",")})), "[\"a\", \"b\", \"\", \"c\"]");
  EXPECT_EQ(to_string(call_method(Value::string(" a  b c "), "split", {Value::none(), Value::integer(1)})), "[\"a\", \"b c\"]");
  EXPECT_EQ(to_string(call_method(Value::string("ab"), "upper")), "AB");
  EXPECT_EQ(to_string(call_method(Value::string("-"), "join", {json_value("[1, 2]")})), "1-2");
  EXPECT_EQ(to_string(member(1, Value::string("aéz"), Value::integer(-2))), "é");
  EXPECT_EQ(to_string(member(1, json_value("[1, 2]"), Value::string("length"))), "2");
  Value d = json_value(R"({"a": 1})");
  EXPECT_EQ(to_string(call_method(d, "keys")), "[\"a\"]");
  EXPECT_EQ(to_string(call_method(d, "get", {Value::string("z"), Value::integer(5)})), "5");
  Value ns = Value::dict();
  ns.is_namespace = true;
  EXPECT_TRUE(member(1, ns, Value::string("items")).is_undefined());  // namespaces have no dict methods
}

}  // namespace
}  // namespace inferlab::jinja
