// Conformance checks: OpenAI's embeddings API (POST /v1/embeddings) — the list of embedding
// objects in input order with usage, one vector per text whatever the batch, base64 as the float
// vector's little-endian float32 bytes, token-id input, and an empty input refused in OpenAI's
// error shape. A server that does not serve embeddings (404, or 501 as llama-server answers
// without --embeddings) skips them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lab/conform/probe.h"

namespace inferlab::lab::conform {
namespace {

const std::vector<std::string> kTexts = {"The cat sat on the mat.", "Paged attention stores the KV cache in blocks.",
                                         "A quick brown fox."};

json embeddings_body(const Probe& p, json input, const json& extra = json::object()) {
  json body = {{"model", p.model()}, {"input", std::move(input)}};
  body.update(extra);
  return body;
}

Answer post_embeddings(Probe& p, const json& body) {
  Answer a = p.post("/v1/embeddings", body);
  if (a.status == 404 || a.status == 501) skip_check(fmt::format("{}: the server does not serve /v1/embeddings", a.status));
  return a;
}

// The float vectors of an answer, in `index` order; fails unless it is OpenAI's list of `count`
// embedding objects of one dimension.
std::vector<std::vector<double>> vectors_of(const Answer& a, std::size_t count) {
  require(a.status == 200, fmt::format("status {}", a.status));
  const json& r = a.parsed;
  require(a.is_json_object() && r.value("object", "") == "list", "the body is not {\"object\":\"list\",...}");
  require(r.contains("model") && r["model"].is_string(), "model is missing or not a string");
  require(r.contains("data") && r["data"].is_array() && r["data"].size() == count,
          fmt::format("data[] does not hold {} embedding(s)", count));
  std::vector<std::vector<double>> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const json& e = r["data"][i];
    require(e.is_object() && e.value("object", "") == "embedding", fmt::format("data[{}].object is not \"embedding\"", i));
    require(e.contains("index") && e["index"] == i, fmt::format("data[{}].index is not {} (inputs' order)", i, i));
    require(e.contains("embedding") && e["embedding"].is_array() && !e["embedding"].empty(),
            fmt::format("data[{}].embedding is not a non-empty array of numbers", i));
    for (const json& x : e["embedding"]) {
      require(x.is_number(), fmt::format("data[{}].embedding holds a non-number", i));
      out[i].push_back(x.get<double>());
    }
    require(out[i].size() == out[0].size(), fmt::format("data[{}] has {} dimensions, data[0] {}", i, out[i].size(), out[0].size()));
  }
  const json& usage = r.value("usage", json());
  require(usage.is_object() && usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer() &&
              usage["prompt_tokens"].get<long>() > 0 && usage.contains("total_tokens") && usage["total_tokens"] == usage["prompt_tokens"],
          "usage needs integer prompt_tokens > 0 and total_tokens equal to it");
  return out;
}

double cosine(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0.0;
}

// Standard base64 (RFC 4648, padded) to bytes; nullopt when it is not.
std::optional<std::string> base64_decoded(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    for (int k = 0; k < 4; ++k) {
      const bool pad = text[i + k] == '=' && i + 4 == text.size() && k >= 2;
      v[k] = pad ? 0 : value(text[i + k]);
      if (v[k] < 0) return std::nullopt;
    }
    const uint32_t bits = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>(bits >> 16);
    if (text[i + 2] != '=') out += static_cast<char>((bits >> 8) & 0xff);
    if (text[i + 3] != '=') out += static_cast<char>(bits & 0xff);
  }
  return out;
}

std::string create(Probe& p) {
  const auto v = vectors_of(post_embeddings(p, embeddings_body(p, kTexts[0])), 1);
  return fmt::format("{} dimensions", v[0].size());
}

// A batch answers each text as it is answered alone (the same vector within float rounding).
std::string batch(Probe& p) {
  const auto together = vectors_of(post_embeddings(p, embeddings_body(p, kTexts)), kTexts.size());
  double worst = 1.0;
  for (std::size_t i = 0; i < kTexts.size(); ++i) {
    const auto alone = vectors_of(post_embeddings(p, embeddings_body(p, kTexts[i])), 1);
    require(alone[0].size() == together[i].size(), fmt::format("text {}: {} dimensions alone, {} in the batch", i, alone[0].size(), together[i].size()));
    worst = std::min(worst, cosine(alone[0], together[i]));
    require(worst >= 0.999, fmt::format("text {}: cosine {:.6f} between its vector alone and in a batch (the batch's order or "
                                        "padding leaks into it)", i, cosine(alone[0], together[i])));
  }
  return fmt::format("{} texts, each as alone (cosine >= {:.6f})", kTexts.size(), worst);
}

// encoding_format base64: the float32 little-endian bytes of the float vector, base64-coded.
std::string base64(Probe& p) {
  const auto floats = vectors_of(post_embeddings(p, embeddings_body(p, kTexts[1])), 1)[0];
  Answer a = post_embeddings(p, embeddings_body(p, kTexts[1], {{"encoding_format", "base64"}}));
  require(a.status == 200, fmt::format("status {} for encoding_format base64", a.status));
  const json& data = a.parsed.value("data", json());
  require(data.is_array() && data.size() == 1 && data[0].is_object() && data[0].contains("embedding") && data[0]["embedding"].is_string(),
          "data[0].embedding is not a base64 string");
  auto bytes = base64_decoded(data[0]["embedding"].get<std::string>());
  require(bytes.has_value(), "data[0].embedding is not valid base64");
  require(bytes->size() == floats.size() * 4,
          fmt::format("{} bytes decoded; {} float32 values make {}", bytes->size(), floats.size(), floats.size() * 4));
  for (std::size_t i = 0; i < floats.size(); ++i) {
    float x;
    std::memcpy(&x, bytes->data() + 4 * i, 4);  // little-endian on every host this runs on
    require(std::fabs(x - floats[i]) <= 1e-5 * std::max(1.0, std::fabs(floats[i])),
            fmt::format("value {}: {} in base64, {} as floats", i, x, floats[i]));
  }
  return fmt::format("{} float32 values equal the float answer", floats.size());
}

// input as token ids (one list of integers) is embedded, its usage the ids' count.
std::string token_input(Probe& p) {
  const json ids = json::array({40, 1079, 264, 1273, 13});
  Answer a = post_embeddings(p, embeddings_body(p, json::array({ids})));
  vectors_of(a, 1);
  const json used = a.parsed["usage"]["prompt_tokens"];
  require(used == ids.size(), fmt::format("usage.prompt_tokens {} for {} token ids", used.dump(), ids.size()));
  return fmt::format("{} token ids embedded", ids.size());
}

std::string empty_input(Probe& p) {
  Answer a = post_embeddings(p, embeddings_body(p, json::array()));
  require_error(a, 400);
  return "400 for input []";
}

}  // namespace

void add_embeddings_checks(std::vector<Check>& checks) {
  checks.push_back({"embeddings.create", "POST /v1/embeddings: a list of embedding objects, model, usage", create});
  checks.push_back({"embeddings.batch", "several inputs: in order, each the vector it has alone", batch});
  checks.push_back({"embeddings.base64", "encoding_format base64: the float vector's little-endian float32 bytes", base64});
  checks.push_back({"embeddings.token_input", "input as token ids: embedded, usage.prompt_tokens their count", token_input});
  checks.push_back({"embeddings.empty_input", "input []: 400 in OpenAI's error shape", empty_input});
}

}  // namespace inferlab::lab::conform
