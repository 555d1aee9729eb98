// Jinja renderer: runs the parsed statements against variables, writing the output.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace inferlab::jinja {

// Variables, looked up from the innermost scope outwards ({% for %} bodies and macros get their own).
class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  const Value* lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent_)
      if (auto it = s->vars_.find(name); it != s->vars_.end()) return &it->second;
    return nullptr;
  }
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

  // Expires when this scope ends: a macro defined here can be stored where it outlives the scope
  // (`{% set ns.f = m %}` from inside a loop) and must then refuse to run.
  std::weak_ptr<const void> lifetime() {
    if (!alive_) alive_ = std::make_shared<char>();
    return alive_;
  }

 private:
  Scope* parent_;
  std::map<std::string, Value> vars_;
  std::shared_ptr<const void> alive_;
};

// Throws Error naming the line for what fails while rendering (a type error, an unsupported filter,
// integer overflow, raise_exception(...), macros recursing deeper than 64 calls...).
std::string render(const Body& body, Scope& globals);

}  // namespace inferlab::jinja
