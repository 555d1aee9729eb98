// What templates can call without defining it: the global functions (namespace, range,
// raise_exception...), the methods of strings, lists and dicts ('a'.upper(), d.items()...), and
// the filters (x | join) and tests (x is defined). Each follows Python Jinja as @huggingface/jinja
// renders it; what is not supported is an error that names it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace inferlab::jinja {

// The global function `name` (raise_exception, namespace, range, dict, strftime_now); undefined
// for any other name.
Value global_function(const std::string& name);

// object.key (attribute) or object[key] (index): a dict's entry or method, a list's or string's
// item (negative indices count from the end) or method; undefined when there is none.
Value member(int line, const Value& object, const Value& key);

// What iterating over v yields: a list's items, a dict's keys, a string's characters; nullopt for
// any other kind.
std::optional<Array> elements(const Value& v);

// `item in container` for a string (substring), list or dict (key) container; nullopt when the
// container cannot hold the item that way.
std::optional<bool> contains(const Value& container, const Value& item);

// v is name(args...)
bool apply_test(int line, const std::string& name, const Value& v, const std::vector<Value>& args);

// v | name(args..., kwargs...)
Value apply_filter(int line, const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs);

}  // namespace inferlab::jinja
