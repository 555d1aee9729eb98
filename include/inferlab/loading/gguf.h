// A small GGUF reader: the header, every metadata key/value, the tensor directory checked against
// the file (known types, whole blocks, aligned offsets, data inside the file), and the tensor
// data memory-mapped (pages are read only when touched).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab {

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;
  uint32_t type = 0;    // ggml_type
  uint64_t offset = 0;  // relative to GgufFile::data_offset
  uint64_t bytes = 0;   // size of the data; 0 for a type inferlab does not run (size unknown)
};

struct GgufFile;
// Throws Error naming the file and what is wrong (bad magic, truncated, unknown value type...).
GgufFile read_gguf(const std::filesystem::path& file);

struct GgufFile {
  uint32_t version = 0;
  std::vector<GgufTensorInfo> tensors;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // file offset where tensor data starts

  // A metadata value as JSON (integers, floats, bools, strings, arrays of those; uint8 arrays
  // stay numbers), or nullptr when the file has no such key.
  const nlohmann::json* find(const std::string& key) const;
  const GgufTensorInfo* tensor(const std::string& name) const;
  // The tensor's bytes in the mapping (info.bytes of them).
  const uint8_t* data(const GgufTensorInfo& info) const;
  std::filesystem::path path;

 private:
  friend GgufFile read_gguf(const std::filesystem::path& file);
  // Shared and immutable once read: copies are cheap and json stays out of this header.
  std::shared_ptr<const std::map<std::string, nlohmann::json>> metadata_;
  std::shared_ptr<const uint8_t> map_;  // the whole file, read-only; unmapped with the last copy
};

}  // namespace inferlab
