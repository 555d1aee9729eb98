#include "inferlab/loading/gguf.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace inferlab {
namespace {

enum GgufType : uint32_t {
  kUint8 = 0, kInt8, kUint16, kInt16, kUint32, kInt32, kFloat32, kBool, kString, kArray,
  kUint64, kInt64, kFloat64,
};

class Reader {
 public:
  // Streams the header only: weight files can be many GB.
  Reader(const std::filesystem::path& file) : path_(file), in_(file, std::ios::binary) {
    if (!in_) fail("cannot open GGUF file {}", file.string());
    std::error_code ec;
    size_ = std::filesystem::file_size(file, ec);
    if (ec) fail("cannot read size of GGUF file {}: {}", file.string(), ec.message());
  }
  template <typename T>
  T get() {
    T value;
    read(&value, sizeof(T));
    return value;
  }
  std::string string() {
    uint64_t length = get<uint64_t>();
    need(length);
    std::string s(length, '\0');
    read(s.data(), length);
    return s;
  }
  nlohmann::json value(uint32_t type, int depth = 0) {
    switch (type) {
      case kUint8: return get<uint8_t>();
      case kInt8: return get<int8_t>();
      case kUint16: return get<uint16_t>();
      case kInt16: return get<int16_t>();
      case kUint32: return get<uint32_t>();
      case kInt32: return get<int32_t>();
      case kFloat32: return get<float>();
      case kBool: return get<uint8_t>() != 0;
      case kString: return string();
      case kUint64: return get<uint64_t>();
      case kInt64: return get<int64_t>();
      case kFloat64: return get<double>();
      case kArray: {
        if (depth > 8) fail("GGUF file {}: arrays nested too deeply at byte {}", path_.string(), pos_);
        uint32_t element_type = get<uint32_t>();
        uint64_t count = get<uint64_t>();
        // Every element takes at least one byte: a count beyond the file is corrupt, not huge.
        if (count > size_ - pos_) fail("GGUF file {}: array of {} elements at byte {} exceeds the file", path_.string(), count, pos_);
        nlohmann::json array = nlohmann::json::array();
        array.get_ref<nlohmann::json::array_t&>().reserve(count);
        for (uint64_t i = 0; i < count; ++i) array.push_back(value(element_type, depth + 1));
        return array;
      }
      default: fail("GGUF file {}: unknown value type {} at byte {}", path_.string(), type, pos_);
    }
  }
  uint64_t position() const { return pos_; }
  uint64_t size() const { return size_; }

 private:
  void need(uint64_t n) {
    if (n > size_ - pos_) fail("GGUF file {} is truncated (needed {} bytes at byte {})", path_.string(), n, pos_);
  }
  void read(void* out, uint64_t n) {
    need(n);
    if (!in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n))) fail("GGUF file {}: read error at byte {}", path_.string(), pos_);
    pos_ += n;
  }
  std::filesystem::path path_;
  std::ifstream in_;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
};

}  // namespace

const nlohmann::json* GgufFile::find(const std::string& key) const {
  if (!metadata_) return nullptr;
  auto it = metadata_->find(key);
  return it == metadata_->end() ? nullptr : &it->second;
}

GgufFile read_gguf(const std::filesystem::path& file) {
  Reader reader(file);
  if (reader.size() < 4 || reader.get<uint32_t>() != 0x46554747u)  // "GGUF" little-endian
    fail("{} is not a GGUF file (bad magic)", file.string());
  GgufFile gguf;
  gguf.version = reader.get<uint32_t>();
  if (gguf.version < 2 || gguf.version > 3) fail("GGUF file {}: unsupported version {} (need 2 or 3)", file.string(), gguf.version);
  uint64_t tensor_count = reader.get<uint64_t>();
  uint64_t kv_count = reader.get<uint64_t>();
  if (kv_count > reader.size() || tensor_count > reader.size()) fail("GGUF file {}: corrupt header counts", file.string());
  auto metadata = std::make_shared<std::map<std::string, nlohmann::json>>();
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = reader.string();
    uint32_t type = reader.get<uint32_t>();
    (*metadata)[key] = reader.value(type);
  }
  gguf.metadata_ = std::move(metadata);
  if (auto* alignment = gguf.find("general.alignment"); alignment && alignment->is_number_unsigned())
    gguf.alignment = alignment->get<uint64_t>();
  if (gguf.alignment == 0) fail("GGUF file {}: general.alignment is 0", file.string());
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    info.name = reader.string();
    uint32_t n_dims = reader.get<uint32_t>();
    if (n_dims > 8) fail("GGUF file {}: tensor {} has {} dimensions", file.string(), info.name, n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) info.dims.push_back(reader.get<uint64_t>());
    info.type = reader.get<uint32_t>();
    info.offset = reader.get<uint64_t>();
    gguf.tensors.push_back(std::move(info));
  }
  gguf.data_offset = (reader.position() + gguf.alignment - 1) / gguf.alignment * gguf.alignment;
  return gguf;
}

}  // namespace inferlab
