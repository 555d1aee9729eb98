// $id / $anchor / $ref resolution within one schema document (schema_references.h).
#include "grammar/schema_references.h"

#include <functional>
#include <map>
#include <set>
#include <vector>

namespace inferlab {
namespace {

using json = nlohmann::ordered_json;

// The base of a document without $id: relative references resolve against it, to itself.
constexpr const char* kDocumentBase = "inferlab:schema";

struct Uri {
  std::string scheme, authority, path, query;
  bool has_scheme = false, has_authority = false;
};

Uri parse(const std::string& text) {
  Uri u;
  std::size_t i = 0;
  const std::size_t colon = text.find(':');
  if (colon != std::string::npos && colon > 0 && std::isalpha(static_cast<unsigned char>(text[0]))) {
    bool scheme = true;
    for (std::size_t j = 0; j < colon; ++j) {
      const char c = text[j];
      scheme = scheme && (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.');
    }
    if (scheme) {
      u.scheme = text.substr(0, colon);
      u.has_scheme = true;
      i = colon + 1;
    }
  }
  if (text.compare(i, 2, "//") == 0) {
    const std::size_t end = text.find_first_of("/?", i + 2);
    u.authority = text.substr(i + 2, (end == std::string::npos ? text.size() : end) - i - 2);
    u.has_authority = true;
    i = end == std::string::npos ? text.size() : end;
  }
  const std::size_t question = text.find('?', i);
  u.path = text.substr(i, (question == std::string::npos ? text.size() : question) - i);
  if (question != std::string::npos) u.query = text.substr(question);
  return u;
}

std::string remove_dot_segments(const std::string& path) {
  const bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string> segments, out;
  std::size_t start = absolute ? 1 : 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    segments.push_back(path.substr(start, (slash == std::string::npos ? path.size() : slash) - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    if (segments[i] == "." || segments[i] == "..") {
      if (segments[i] == ".." && !out.empty()) out.pop_back();
      if (last) out.push_back("");
      continue;
    }
    out.push_back(segments[i]);
  }
  std::string joined = absolute ? "/" : "";
  for (std::size_t i = 0; i < out.size(); ++i) joined += (i ? "/" : "") + out[i];
  return joined;
}

std::string to_string(const Uri& u) {
  return (u.has_scheme ? u.scheme + ":" : "") + (u.has_authority ? "//" + u.authority : "") + u.path + u.query;
}

std::string without_fragment(const std::string& uri) { return uri.substr(0, uri.find('#')); }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else if (c == '%') out += "%25";
    else out += c;
  }
  return out;
}

// Calls visit(schema, its JSON pointer) for every schema in the document, in schema positions only
// (not inside const, enum, default, examples).
void each_schema(json& node, const std::string& pointer, const std::function<void(json&, const std::string&)>& visit) {
  if (!node.is_object()) return;
  visit(node, pointer);
  static const std::set<std::string> kMaps = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"};
  static const std::set<std::string> kSingle = {"items", "additionalProperties", "propertyNames", "not", "if", "then", "else",
                                                "contains", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
                                                "additionalItems"};
  static const std::set<std::string> kLists = {"prefixItems", "allOf", "anyOf", "oneOf"};
  for (auto& [key, value] : node.items()) {
    const std::string at = pointer + "/" + pointer_token(key);
    if (kMaps.count(key) && value.is_object()) {
      for (auto& [name, sub] : value.items()) each_schema(sub, at + "/" + pointer_token(name), visit);
    } else if (kSingle.count(key)) {
      each_schema(value, at, visit);
    } else if (kLists.count(key) && value.is_array()) {
      for (std::size_t i = 0; i < value.size(); ++i) each_schema(value[i], at + "/" + std::to_string(i), visit);
    }
  }
}

}  // namespace

std::string resolve_uri(const std::string& base_text, const std::string& reference) {
  const Uri base = parse(without_fragment(base_text));
  const std::size_t hash = reference.find('#');
  const Uri r = parse(reference.substr(0, hash));
  const std::string fragment = hash == std::string::npos ? "" : reference.substr(hash);
  Uri t;
  if (r.has_scheme) {
    t = r;
    t.path = remove_dot_segments(r.path);
  } else {
    t.scheme = base.scheme, t.has_scheme = base.has_scheme;
    if (r.has_authority) {
      t.authority = r.authority, t.has_authority = true;
      t.path = remove_dot_segments(r.path);
      t.query = r.query;
    } else {
      t.authority = base.authority, t.has_authority = base.has_authority;
      if (r.path.empty()) {
        t.path = base.path;
        t.query = r.query.empty() ? base.query : r.query;
      } else {
        if (r.path[0] == '/') {
          t.path = remove_dot_segments(r.path);
        } else if (base.has_authority && base.path.empty()) {
          t.path = remove_dot_segments("/" + r.path);
        } else {
          const std::size_t slash = base.path.rfind('/');
          t.path = remove_dot_segments((slash == std::string::npos ? "" : base.path.substr(0, slash + 1)) + r.path);
        }
        t.query = r.query;
      }
    }
  }
  return to_string(t) + fragment;
}

json resolve_references(const json& root) {
  json out = root;
  // The base URI of each schema, and the schemas each URI (an $id) and URI#anchor names.
  std::map<std::string, std::string> base_of;  // pointer -> base URI
  std::map<std::string, std::string> resources, anchors;
  std::set<std::string> ambiguous;
  std::map<std::string, std::set<std::string>> dynamic_anchors;  // $dynamicAnchor name -> the schemas with it
  const std::string document =
      root.is_object() && root.contains("$id") && root["$id"].is_string() ? without_fragment(resolve_uri(kDocumentBase, root["$id"].get<std::string>()))
                                                                           : kDocumentBase;
  resources[kDocumentBase] = "";
  resources[document] = "";
  each_schema(out, "", [&](json& node, const std::string& pointer) {
    // The base: the nearest enclosing schema's, changed by this one's $id.
    std::string base = document;
    for (std::string p = pointer; !p.empty();) {
      p = p.substr(0, p.rfind('/'));
      if (auto it = base_of.find(p); it != base_of.end()) {
        base = it->second;
        break;
      }
    }
    if (pointer.empty()) base = document;
    if (auto it = node.find("$id"); it != node.end() && it->is_string() && !pointer.empty()) {
      base = without_fragment(resolve_uri(base, it->get<std::string>()));
      if (resources.count(base)) ambiguous.insert(base);
      resources[base] = pointer;
    }
    base_of[pointer] = base;
    // A $dynamicAnchor is an anchor too (a $ref to it is a plain reference); the schemas that have
    // one are counted by name for $dynamicRef below.
    for (const char* keyword : {"$anchor", "$dynamicAnchor"})
      if (auto it = node.find(keyword); it != node.end() && it->is_string()) {
        const std::string name = base + "#" + it->get<std::string>();
        if (anchors.count(name) && anchors[name] != pointer) ambiguous.insert(name);
        anchors[name] = pointer;
      }
    if (auto it = node.find("$dynamicAnchor"); it != node.end() && it->is_string()) dynamic_anchors[it->get<std::string>()].insert(pointer);
  });
  // A reference's target as "#pointer" from the root, or "" when it names nothing in the document.
  auto resolve = [&](const std::string& pointer, const std::string& original) {
    const std::string target = resolve_uri(base_of[pointer], original);
    const std::size_t hash = target.find('#');
    const std::string uri = target.substr(0, hash), fragment = hash == std::string::npos ? "" : target.substr(hash + 1);
    std::string resolved;
    if (auto r = resources.find(uri); r != resources.end() && !ambiguous.count(uri)) {
      if (fragment.empty()) resolved = "#" + r->second;
      else if (fragment[0] == '/') resolved = "#" + r->second + fragment;
      else if (auto a = anchors.find(uri + "#" + fragment); a != anchors.end() && !ambiguous.count(a->first)) resolved = "#" + a->second;
    }
    return std::pair{resolved, fragment};
  };
  // $dynamicRef where the dynamic scope cannot change its target: it resolves as $ref does, and
  // either its fragment is no plain name, or the schema it reaches has no $dynamicAnchor of that
  // name, or no other schema in the document has one (only those could take over, and other
  // documents are never read). Then it is a $ref; otherwise it stays, for the converter to refuse.
  each_schema(out, "", [&](json& node, const std::string& pointer) {
    auto it = node.find("$dynamicRef");
    if (it == node.end() || !it->is_string() || node.contains("$ref")) return;
    const std::string original = it->get<std::string>();
    const auto [resolved, fragment] = resolve(pointer, original);
    if (resolved.empty()) return;
    if (!fragment.empty() && fragment[0] != '/') {
      const json* target = nullptr;
      try {
        target = &out.at(json::json_pointer(resolved.substr(1)));
      } catch (const json::exception&) {
        return;  // a pointer with %-escapes: left to refuse
      }
      const bool bookend = target->is_object() && target->value("$dynamicAnchor", json()) == json(fragment);
      if (bookend && dynamic_anchors[fragment].size() > 1) return;
    }
    node.erase("$dynamicRef");
    node["$ref"] = original;
  });
  each_schema(out, "", [&](json& node, const std::string& pointer) {
    auto it = node.find("$ref");
    if (it == node.end() || !it->is_string()) return;
    const std::string original = it->get<std::string>();
    const std::string resolved = resolve(pointer, original).first;
    *it = resolved.empty() ? std::string(1, kUnresolvedRef) + original : resolved;
  });
  return out;
}

}  // namespace inferlab
