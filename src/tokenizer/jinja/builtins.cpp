#include "tokenizer/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "inferlab/util/error.h"
#include "tokenizer/jinja/text.h"

namespace inferlab::jinja {
namespace {

// Template integers are 64-bit (Python's are unbounded): a result that does not fit is an error,
// never undefined behaviour.
bool fits_int64(double x) { return x >= -0x1p63 && x < 0x1p63; }  // false for NaN

// The case mappings that are both string methods and filters ('a'.upper(), 'a' | upper).
using CaseMapping = std::string (*)(const std::string&);
CaseMapping case_mapping(const std::string& name) {
  if (name == "upper") return to_upper;
  if (name == "lower") return to_lower;
  if (name == "title") return title_case;
  if (name == "capitalize") return capitalize;
  return nullptr;
}

std::string join(const Array& items, const std::string& separator) {
  std::string out;
  for (std::size_t k = 0; k < items.size(); ++k) out += (k ? separator : "") + to_string(items[k]);
  return out;
}

// Python's str.split() without a separator: runs of whitespace, no empty parts.
Array split_whitespace(const std::string& s, int64_t maxsplit) {
  Array parts;
  std::size_t k = 0, n = 0;
  while (true) {
    while (k < s.size() && is_space_at(s, k, &n)) k += n;
    if (k >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(Value::string(trim_right(s.substr(k))));
      break;
    }
    std::size_t start = k;
    while (k < s.size() && !is_space_at(s, k, &n)) k += n;
    parts.push_back(Value::string(s.substr(start, k - start)));
  }
  return parts;
}

// A dict's [key, value] pairs, as items() and the items filter give them.
Value items_of(const Object& object) {
  Array a;
  for (auto& [k, v] : object) a.push_back(Value::list({Value::string(k), v}));
  return Value::list(std::move(a));
}

Array keys_of(const Object& object) {
  Array a;
  for (auto& [k, v] : object) a.push_back(Value::string(k));
  return a;
}

// The order of the sort, min and max filters: numbers by value, anything else by its printed form.
bool sorts_before(const Value& x, const Value& y) {
  return x.is_number() && y.is_number() ? x.as_double() < y.as_double() : to_string(x) < to_string(y);
}

Value string_method(const std::string& s, const std::string& name) {
  auto fn = [](auto f) { return Value::callable(f); };
  if (CaseMapping map = case_mapping(name)) return fn([s, map](std::vector<Value>&, Kwargs&) { return Value::string(map(s)); });
  if (name == "strip" || name == "lstrip" || name == "rstrip") return fn([s, name](std::vector<Value>& args, Kwargs&) {
    bool left = name != "rstrip", right = name != "lstrip";
    if (!args.empty() && args[0].is_string()) return Value::string(strip_chars(s, args[0].s, left, right));
    std::string out = s;
    if (left) out = trim_left(out);
    if (right) out = trim_right(out);
    return Value::string(out);
  });
  if (name == "startswith" || name == "endswith") return fn([s, name](std::vector<Value>& args, Kwargs&) {
    std::vector<std::string> options;
    if (!args.empty() && args[0].is_string()) options.push_back(args[0].s);
    else if (!args.empty() && args[0].kind == Value::Kind::Array)
      for (auto& v : *args[0].array) options.push_back(v.s);
    for (auto& o : options)
      if (name == "startswith" ? s.starts_with(o) : s.ends_with(o)) return Value::boolean(true);
    return Value::boolean(false);
  });
  if (name == "split") return fn([s](std::vector<Value>& args, Kwargs& kwargs) {
    const Value* sep = !args.empty() ? &args[0] : kwargs.get("sep");
    const Value* max = args.size() > 1 ? &args[1] : kwargs.get("maxsplit");
    int64_t maxsplit = max && max->kind == Value::Kind::Int ? max->i : -1;
    if (!sep || sep->is_none()) return Value::list(split_whitespace(s, maxsplit));
    if (!sep->is_string() || sep->s.empty()) fail("chat template: split() separator must be a non-empty string");
    Array parts;
    std::size_t start = 0;
    while (true) {
      std::size_t at = s.find(sep->s, start);
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
        parts.push_back(Value::string(s.substr(start)));
        break;
      }
      parts.push_back(Value::string(s.substr(start, at - start)));
      start = at + sep->s.size();
    }
    return Value::list(std::move(parts));
  });
  if (name == "replace") return fn([s](std::vector<Value>& args, Kwargs&) {
    if (args.size() < 2 || !args[0].is_string() || !args[1].is_string()) fail("chat template: replace(old, new) needs two strings");
    int64_t count = args.size() > 2 && args[2].kind == Value::Kind::Int ? args[2].i : -1;
    return Value::string(replace_all(s, args[0].s, args[1].s, count));
  });
  if (name == "count") return fn([s](std::vector<Value>& args, Kwargs&) {
    if (args.empty() || !args[0].is_string() || args[0].s.empty()) return Value::integer(0);
    int64_t n = 0;
    for (std::size_t at = s.find(args[0].s); at != std::string::npos; at = s.find(args[0].s, at + args[0].s.size())) ++n;
    return Value::integer(n);
  });
  if (name == "find") return fn([s](std::vector<Value>& args, Kwargs&) {
    if (args.empty() || !args[0].is_string()) return Value::integer(-1);
    std::size_t at = s.find(args[0].s);
    return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(characters(s.substr(0, at)).size()));
  });
  if (name == "join") return fn([s](std::vector<Value>& args, Kwargs&) {
    return Value::string(!args.empty() && args[0].kind == Value::Kind::Array ? join(*args[0].array, s) : "");
  });
  if (name == "length") return Value::integer(static_cast<int64_t>(characters(s).size()));
  return Value();
}

Value list_method(const Value& self, const std::string& name) {
  auto array = self.array;
  if (name == "append") return Value::callable([array](std::vector<Value>& args, Kwargs&) {
    if (!args.empty() && holds(args[0], array.get())) fail("chat template: a list cannot be appended into itself");
    if (!args.empty()) array->push_back(args[0]);
    return Value();
  });
  if (name == "length") return Value::integer(static_cast<int64_t>(array->size()));
  return Value();
}

Value object_method(const Value& self, const std::string& name) {
  auto object = self.object;
  if (self.is_namespace) return Value();
  if (name == "items") return Value::callable([object](std::vector<Value>&, Kwargs&) { return items_of(*object); });
  if (name == "keys") return Value::callable([object](std::vector<Value>&, Kwargs&) { return Value::list(keys_of(*object)); });
  if (name == "values") return Value::callable([object](std::vector<Value>&, Kwargs&) {
    Array a;
    for (auto& [k, v] : *object) a.push_back(v);
    return Value::list(std::move(a));
  });
  if (name == "get") return Value::callable([object](std::vector<Value>& args, Kwargs&) {
    if (!args.empty() && args[0].is_string())
      for (auto& [k, v] : *object)
        if (k == args[0].s) return v;
    return args.size() > 1 ? args[1] : Value::none();
  });
  return Value();
}

// item.a.b for the attribute= of map, sort, selectattr...
Value attribute_of(int line, const Value& item, const std::string& path) {
  Value current = item;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    current = member(line, current, Value::string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

}  // namespace

Value global_function(const std::string& name) {
  if (name == "raise_exception")
    return Value::callable([](std::vector<Value>& args, Kwargs&) -> Value {
      fail("chat template raised an exception: {}", args.empty() ? "" : to_string(args[0]));
    });
  if (name == "namespace")
    return Value::callable([](std::vector<Value>& args, Kwargs& kwargs) {
      Value ns = Value::dict();
      ns.is_namespace = true;
      if (!args.empty() && args[0].kind == Value::Kind::Object)
        for (auto& [k, v] : *args[0].object) ns.set(k, v);
      for (auto& [k, v] : kwargs.items) ns.set(k, v);
      return ns;
    });
  if (name == "range")
    return Value::callable([](std::vector<Value>& args, Kwargs&) {
      int64_t start = 0, stop = 0, step = 1;
      if (args.size() == 1) stop = args[0].i;
      else if (args.size() >= 2) { start = args[0].i; stop = args[1].i; }
      if (args.size() >= 3) step = args[2].i;
      if (step == 0) fail("chat template: range() step must not be zero");
      Array a;
      for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
        a.push_back(Value::integer(k));
        if (a.size() > 10'000'000) fail("chat template: range() too large");
        if (__builtin_add_overflow(k, step, &k)) break;  // the next value is past any int64 stop
      }
      return Value::list(std::move(a));
    });
  if (name == "dict")
    return Value::callable([](std::vector<Value>&, Kwargs& kwargs) {
      Value d = Value::dict();
      for (auto& [k, v] : kwargs.items) d.set(k, v);
      return d;
    });
  if (name == "strftime_now")
    return Value::callable([](std::vector<Value>& args, Kwargs&) {
      std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[256];
      std::size_t n = std::strftime(buffer, sizeof buffer, args.empty() ? "%Y-%m-%d" : args[0].s.c_str(), &local);
      return Value::string(std::string(buffer, n));
    });
  return Value();
}

Value member(int line, const Value& object, const Value& key) {
  if (object.kind == Value::Kind::Object) {
    if (!key.is_string()) error_at(line, fmt::format("dict keys are strings, got a {}", kind_name(key)));
    if (const Value* v = object.find(key.s)) return *v;
    return object_method(object, key.s);
  }
  if (object.kind == Value::Kind::Array || object.is_string()) {
    if (key.kind == Value::Kind::Int) {
      std::vector<std::string> chars;
      if (object.is_string()) chars = characters(object.s);
      auto size = static_cast<int64_t>(object.kind == Value::Kind::Array ? object.array->size() : chars.size());
      int64_t index = key.i < 0 ? key.i + size : key.i;
      if (index < 0 || index >= size) return Value();
      if (object.kind == Value::Kind::Array) return (*object.array)[index];
      return Value::string(chars[index]);
    }
    if (key.is_string()) return object.is_string() ? string_method(object.s, key.s) : list_method(object, key.s);
    error_at(line, fmt::format("cannot index a {} with a {}", kind_name(object), kind_name(key)));
  }
  return Value();
}

std::optional<Array> elements(const Value& v) {
  if (v.kind == Value::Kind::Array) return *v.array;
  if (v.kind == Value::Kind::Object) return keys_of(*v.object);
  if (v.is_string()) {
    Array a;
    for (auto& ch : characters(v.s)) a.push_back(Value::string(ch));
    return a;
  }
  return std::nullopt;
}

std::optional<bool> contains(const Value& container, const Value& item) {
  if (container.is_string() && item.is_string()) return container.s.find(item.s) != std::string::npos;
  if (container.kind == Value::Kind::Array)
    return std::any_of(container.array->begin(), container.array->end(), [&](const Value& x) { return equal(x, item); });
  if (container.kind == Value::Kind::Object && item.is_string()) return container.find(item.s) != nullptr;
  return std::nullopt;
}

bool apply_test(int line, const std::string& t, const Value& v, const std::vector<Value>& args) {
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.kind == Value::Kind::Int;
  if (t == "float") return v.kind == Value::Kind::Float;
  if (t == "boolean") return v.kind == Value::Kind::Bool;
  if (t == "true") return v.kind == Value::Kind::Bool && v.b;
  if (t == "false") return v.kind == Value::Kind::Bool && !v.b;
  if (t == "mapping") return v.kind == Value::Kind::Object;
  if (t == "sequence" || t == "iterable") return v.kind == Value::Kind::Array || v.is_string() || (t == "iterable" && v.kind == Value::Kind::Object);
  if (t == "callable") return v.kind == Value::Kind::Function;
  if (t == "odd" || t == "even") {
    if (v.kind != Value::Kind::Int) error_at(line, "odd/even tests need an integer");
    return (v.i % 2 != 0) == (t == "odd");
  }
  if (t == "divisibleby")  // every integer divides by -1 (and INT64_MIN % -1 would trap)
    return v.kind == Value::Kind::Int && !args.empty() && args[0].i != 0 && (args[0].i == -1 || v.i % args[0].i == 0);
  if (t == "equalto" || t == "eq" || t == "sameas") return !args.empty() && equal(v, args[0]);
  if (t == "ne") return args.empty() || !equal(v, args[0]);
  if (t == "in") return !args.empty() && contains(args[0], v).value_or(false);
  if (t == "lower" || t == "upper") return v.is_string() && (t == "lower" ? to_lower(v.s) : to_upper(v.s)) == v.s;
  error_at(line, fmt::format("the Jinja test '{}' is not supported", t));
}

Value apply_filter(int line, const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  auto need_array = [&] {
    if (v.kind != Value::Kind::Array) error_at(line, fmt::format("filter '{}' needs a list, got a {}", name, kind_name(v)));
  };
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::integer(static_cast<int64_t>(characters(v.s).size()));
    if (v.kind == Value::Kind::Array) return Value::integer(static_cast<int64_t>(v.array->size()));
    if (v.kind == Value::Kind::Object) return Value::integer(static_cast<int64_t>(v.object->size()));
    error_at(line, fmt::format("filter 'length' needs a string, list or dict, got a {}", kind_name(v)));
  }
  if (name == "trim") {
    if (!v.is_string()) error_at(line, "filter 'trim' needs a string");
    return Value::string(trim_right(trim_left(v.s)));
  }
  if (name == "tojson") {
    const Value* indent = args.empty() ? kwargs.get("indent") : &args[0];
    if (indent && indent->kind == Value::Kind::Int && indent->i > static_cast<int64_t>(kMaxRepeatBytes))
      error_at(line, fmt::format("filter 'tojson': an indent of {} is larger than {} MiB", indent->i, kMaxRepeatBytes >> 20));
    int width = indent && indent->kind == Value::Kind::Int ? static_cast<int>(indent->i) : 0;
    return Value::string(to_json(v, width, 0, true));
  }
  if (name == "string") return Value::string(to_string(v));
  if (CaseMapping map = case_mapping(name)) {
    if (!v.is_string()) error_at(line, fmt::format("filter '{}' needs a string", name));
    return Value::string(map(v.s));
  }
  if (name == "default" || name == "d") {
    bool boolean = (args.size() > 1 && truthy(args[1])) || (kwargs.get("boolean") && truthy(*kwargs.get("boolean")));
    Value fallback = args.empty() ? Value::string("") : args[0];
    if (v.is_undefined() || (boolean && !truthy(v))) return fallback;
    return v;
  }
  if (name == "first" || name == "last") {
    if (v.is_string()) {
      auto chars = characters(v.s);
      if (chars.empty()) return Value();
      return Value::string(name == "first" ? chars.front() : chars.back());
    }
    need_array();
    if (v.array->empty()) return Value();
    return name == "first" ? v.array->front() : v.array->back();
  }
  if (name == "join") {
    need_array();
    return Value::string(join(*v.array, args.empty() ? "" : to_string(args[0])));
  }
  if (name == "list") return Value::list(elements(v).value_or(Array{}));
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = characters(v.s);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(out);
    }
    need_array();
    Array a(v.array->rbegin(), v.array->rend());
    return Value::list(std::move(a));
  }
  if (name == "items") {
    if (v.kind != Value::Kind::Object || v.is_namespace) error_at(line, "filter 'items' needs a dict");
    return items_of(*v.object);
  }
  if (name == "dictsort") {
    if (v.kind != Value::Kind::Object) error_at(line, "filter 'dictsort' needs a dict");
    Object sorted = *v.object;
    std::stable_sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first < b.first; });
    return items_of(sorted);
  }
  if (name == "unique") {
    need_array();
    Array a;
    for (auto& x : *v.array)
      if (std::none_of(a.begin(), a.end(), [&](const Value& y) { return equal(x, y); })) a.push_back(x);
    return Value::list(std::move(a));
  }
  if (name == "map") {
    need_array();
    Array a;
    const Value* attribute = kwargs.get("attribute");
    for (auto& x : *v.array) {
      if (attribute) {
        Value got = attribute_of(line, x, to_string(*attribute));
        if (got.is_undefined() && kwargs.get("default")) got = *kwargs.get("default");
        a.push_back(got);
      } else if (!args.empty() && args[0].is_string()) {
        std::vector<Value> rest(args.begin() + 1, args.end());
        Kwargs no;
        a.push_back(apply_filter(line, args[0].s, x, rest, no));
      } else {
        error_at(line, "filter 'map' needs attribute=... or a filter name");
      }
    }
    return Value::list(std::move(a));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    need_array();
    bool by_attribute = name == "selectattr" || name == "rejectattr";
    bool keep_when = name == "selectattr" || name == "select";
    std::size_t next_arg = 0;
    std::string attribute;
    if (by_attribute) {
      if (args.empty()) error_at(line, fmt::format("filter '{}' needs an attribute name", name));
      attribute = to_string(args[next_arg++]);
    }
    std::string test_name = next_arg < args.size() ? to_string(args[next_arg++]) : "";
    std::vector<Value> extra(args.begin() + static_cast<long>(std::min(next_arg, args.size())), args.end());
    Array a;
    for (auto& x : *v.array) {
      Value subject = by_attribute ? attribute_of(line, x, attribute) : x;
      bool passed = test_name.empty() ? truthy(subject) : apply_test(line, test_name, subject, extra);
      if (passed == keep_when) a.push_back(x);
    }
    return Value::list(std::move(a));
  }
  if (name == "int") {
    if (v.kind == Value::Kind::Int) return v;
    if (v.kind == Value::Kind::Float) {
      if (!fits_int64(v.f)) error_at(line, fmt::format("filter 'int': {} does not fit a 64-bit integer", format_double(v.f)));
      return Value::integer(static_cast<int64_t>(v.f));
    }
    if (v.is_string()) {
      try { return Value::integer(std::stoll(v.s)); } catch (...) { return args.empty() ? Value::integer(0) : args[0]; }
    }
    if (v.kind == Value::Kind::Bool) return Value::integer(v.b);
    return Value::integer(0);
  }
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_double());
    if (v.is_string()) {
      try { return Value::number(std::stod(v.s)); } catch (...) { return Value::number(0); }
    }
    return Value::number(0);
  }
  if (name == "abs") {
    if (v.kind == Value::Kind::Int && v.i == INT64_MIN) error_at(line, fmt::format("integer overflow in abs({})", v.i));
    if (v.kind == Value::Kind::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == Value::Kind::Float) return Value::number(std::fabs(v.f));
    error_at(line, "filter 'abs' needs a number");
  }
  if (name == "round") {
    if (!v.is_number()) error_at(line, "filter 'round' needs a number");
    int precision = args.empty() ? 0 : static_cast<int>(args[0].i);
    double scale = std::pow(10.0, precision);
    return Value::number(std::round(v.as_double() * scale) / scale);
  }
  if (name == "replace") {
    if (!v.is_string() || args.size() < 2) error_at(line, "filter 'replace' needs a string and (old, new)");
    int64_t count = args.size() > 2 && args[2].kind == Value::Kind::Int ? args[2].i : -1;
    return Value::string(replace_all(v.s, to_string(args[0]), to_string(args[1]), count));
  }
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe") return v;
    std::string out;
    for (char c : to_string(v)) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::string(out);
  }
  if (name == "indent") {
    if (!v.is_string()) error_at(line, "filter 'indent' needs a string");
    const Value* width_arg = !args.empty() ? &args[0] : kwargs.get("width");
    if (width_arg && !width_arg->is_string() && width_arg->i > static_cast<int64_t>(kMaxRepeatBytes))
      error_at(line, fmt::format("filter 'indent': a width of {} is larger than {} MiB", width_arg->i, kMaxRepeatBytes >> 20));
    std::string pad = width_arg ? (width_arg->is_string() ? width_arg->s : std::string(std::max<int64_t>(0, width_arg->i), ' ')) : "    ";
    const Value* first_arg = args.size() > 1 ? &args[1] : kwargs.get("first");
    const Value* blank_arg = args.size() > 2 ? &args[2] : kwargs.get("blank");
    bool first = first_arg && truthy(*first_arg), blank = blank_arg && truthy(*blank_arg);
    std::string out;
    std::size_t start = 0;
    for (int k = 0;; ++k) {
      std::size_t nl = v.s.find('\n', start);
      std::string part = v.s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (k > 0) out += '\n';
      out += ((!first && k == 0) || (!blank && part.empty())) ? part : pad + part;
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return Value::string(out);
  }
  if (name == "min" || name == "max" || name == "sum") {
    need_array();
    if (v.array->empty()) return name == "sum" ? Value::integer(0) : Value();
    if (name == "sum") {
      Value total = Value::integer(0);
      for (auto& x : *v.array) {
        if (!x.is_number()) error_at(line, "filter 'sum' needs numbers");
        total = total.kind == Value::Kind::Int && x.kind == Value::Kind::Int ? Value::integer(total.i + x.i) : Value::number(total.as_double() + x.as_double());
      }
      return total;
    }
    Value best = v.array->front();
    for (auto& x : *v.array) {
      bool less = sorts_before(x, best);
      if (name == "min" ? less : (!less && !equal(x, best))) best = x;
    }
    return best;
  }
  if (name == "sort") {
    need_array();
    Array a = *v.array;
    const Value* attribute = kwargs.get("attribute");
    bool reverse = kwargs.get("reverse") && truthy(*kwargs.get("reverse"));
    auto key = [&](const Value& x) { return attribute ? attribute_of(line, x, to_string(*attribute)) : x; };
    std::stable_sort(a.begin(), a.end(), [&](const Value& x, const Value& y) {
      Value kx = key(x), ky = key(y);
      bool less = sorts_before(kx, ky);
      return reverse ? (!less && !equal(kx, ky)) : less;
    });
    return Value::list(std::move(a));
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(split_whitespace(to_string(v), -1).size()));
  error_at(line, fmt::format("the Jinja filter '{}' is not supported", name));
}

}  // namespace inferlab::jinja
