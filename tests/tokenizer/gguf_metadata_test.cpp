// Tokenizer::from_gguf on GGUF files whose tokenizer metadata has the wrong types: each is an
// inferlab::Error naming the key (never a json type error), and the well-typed file loads.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <unistd.h>

#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {
namespace {

// Writes GGUF v3 files with metadata only (no tensors), value by value as the format stores them.
class GgufWriter {
 public:
  enum Type : uint32_t { kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9 };
  using Value = std::function<void(std::string&)>;

  static Value str(const std::string& s) {
    return [s](std::string& out) { put<uint32_t>(out, kString), put_string(out, s); };
  }
  static Value u32(uint32_t v) {
    return [v](std::string& out) { put<uint32_t>(out, kUint32), put<uint32_t>(out, v); };
  }
  static Value f32(float v) {
    return [v](std::string& out) { put<uint32_t>(out, kFloat32), put<float>(out, v); };
  }
  static Value boolean(bool v) {
    return [v](std::string& out) { put<uint32_t>(out, kBool), put<uint8_t>(out, v ? 1 : 0); };
  }
  static Value strings(const std::vector<std::string>& items) {
    return [items](std::string& out) {
      put<uint32_t>(out, kArray), put<uint32_t>(out, kString), put<uint64_t>(out, items.size());
      for (const auto& s : items) put_string(out, s);
    };
  }
  static Value int32s(const std::vector<int32_t>& items) {
    return [items](std::string& out) {
      put<uint32_t>(out, kArray), put<uint32_t>(out, kInt32), put<uint64_t>(out, items.size());
      for (int32_t v : items) put<int32_t>(out, v);
    };
  }
  static Value float32s(const std::vector<float>& items) {
    return [items](std::string& out) {
      put<uint32_t>(out, kArray), put<uint32_t>(out, kFloat32), put<uint64_t>(out, items.size());
      for (float v : items) put<float>(out, v);
    };
  }

  static std::filesystem::path write(const std::map<std::string, Value>& metadata, const std::string& name) {
    std::string out;
    put<uint32_t>(out, 0x46554747u);
    put<uint32_t>(out, 3);
    put<uint64_t>(out, 0);
    put<uint64_t>(out, metadata.size());
    for (const auto& [key, value] : metadata) put_string(out, key), value(out);
    auto path = std::filesystem::temp_directory_path() / ("inferlab_gguf_" + std::to_string(getpid()) + "_" + name + ".gguf");
    std::ofstream(path, std::ios::binary).write(out.data(), static_cast<std::streamsize>(out.size()));
    return path;
  }

 private:
  template <typename T>
  static void put(std::string& out, T v) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &v, sizeof(T));
    out.append(bytes, sizeof(T));
  }
  static void put_string(std::string& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out += s;
  }
};

using W = GgufWriter;

// A tiny byte-level BPE vocabulary: "a", "b", "ab", end of text.
std::map<std::string, W::Value> valid_metadata() {
  return {{"tokenizer.ggml.model", W::str("gpt2")},
          {"tokenizer.ggml.tokens", W::strings({"a", "b", "ab", "<|endoftext|>"})},
          {"tokenizer.ggml.token_type", W::int32s({1, 1, 1, 3})},
          {"tokenizer.ggml.merges", W::strings({"a b"})},
          {"tokenizer.ggml.pre", W::str("gpt2")},
          {"tokenizer.ggml.bos_token_id", W::u32(3)},
          {"tokenizer.ggml.eos_token_id", W::u32(3)},
          {"tokenizer.ggml.add_bos_token", W::boolean(false)},
          {"tokenizer.chat_template", W::str("{{ messages[0].content }}")}};
}

// from_gguf must throw inferlab::Error whose message holds every one of `needles`.
void expect_error_naming(const std::map<std::string, W::Value>& metadata, const std::string& name,
                         std::vector<std::string> needles) {
  auto path = W::write(metadata, name);
  try {
    Tokenizer::from_gguf(path);
    ADD_FAILURE() << name << ": loaded without an error";
  } catch (const Error& e) {
    for (const auto& needle : needles) EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << name << ": " << e.what();
    EXPECT_EQ(std::string(e.what()).find("type_error"), std::string::npos) << name << ": a json error leaked: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": not an inferlab::Error: " << e.what();
  }
  std::filesystem::remove(path);
}

TEST(GgufMetadata, WellTypedVocabularyLoadsAndEncodes) {
  auto path = W::write(valid_metadata(), "valid");
  auto tokenizer = Tokenizer::from_gguf(path);
  EXPECT_EQ(tokenizer->encode("ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(tokenizer->encode("ab<|endoftext|>"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tokenizer->eos_token(), "<|endoftext|>");
  std::filesystem::remove(path);
}

TEST(GgufMetadata, WrongTypesAreErrorsNamingTheKey) {
  struct Case {
    const char* name;
    const char* key;
    W::Value value;
    std::vector<std::string> needles;
  };
  std::vector<Case> cases = {
      {"model_number", "tokenizer.ggml.model", W::u32(2), {"tokenizer.ggml.model", "string"}},
      {"tokens_string", "tokenizer.ggml.tokens", W::str("a b ab"), {"tokenizer.ggml.tokens", "array"}},
      {"tokens_floats", "tokenizer.ggml.tokens", W::float32s({1, 2, 3, 4}), {"tokenizer.ggml.tokens[0]", "string"}},
      {"token_type_strings", "tokenizer.ggml.token_type", W::strings({"1", "1", "1", "3"}), {"tokenizer.ggml.token_type[0]", "integer"}},
      {"token_type_short", "tokenizer.ggml.token_type", W::int32s({1, 1}), {"tokenizer.ggml.token_type", "one entry per token"}},
      {"merges_scale", "tokenizer.ggml.merges", W::f32(0.5f), {"tokenizer.ggml.merges", "array"}},
      {"merges_numbers", "tokenizer.ggml.merges", W::int32s({1}), {"tokenizer.ggml.merges[0]", "string"}},
      {"pre_number", "tokenizer.ggml.pre", W::u32(1), {"tokenizer.ggml.pre", "string"}},
      {"bos_string", "tokenizer.ggml.bos_token_id", W::str("3"), {"tokenizer.ggml.bos_token_id", "token id"}},
      {"eos_float", "tokenizer.ggml.eos_token_id", W::f32(3.0f), {"tokenizer.ggml.eos_token_id", "token id"}},
      {"eos_outside", "tokenizer.ggml.eos_token_id", W::u32(99), {"tokenizer.ggml.eos_token_id", "0..3"}},
      {"add_bos_string", "tokenizer.ggml.add_bos_token", W::str("true"), {"tokenizer.ggml.add_bos_token", "bool"}},
      {"chat_template_array", "tokenizer.chat_template", W::strings({"x"}), {"tokenizer.chat_template", "string"}},
  };
  for (const auto& c : cases) {
    auto metadata = valid_metadata();
    metadata[c.key] = c.value;
    expect_error_naming(metadata, c.name, c.needles);
  }
}

TEST(GgufMetadata, MissingRequiredKeysAreNamed) {
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.merges"}) {
    auto metadata = valid_metadata();
    metadata.erase(key);
    expect_error_naming(metadata, std::string("missing_") + key, {key});
  }
}

}  // namespace
}  // namespace inferlab
