#include "inferlab/loading/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/tensor/fast/ggml_blocks.h"
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

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* GgufFile::data(const GgufTensorInfo& info) const {
  if (!map_) fail("GGUF file {}: tensor data is not mapped", path.string());
  return map_.get() + data_offset + info.offset;
}

namespace {
std::shared_ptr<const uint8_t> map_file(const std::filesystem::path& file, uint64_t size) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open GGUF file {}: {}", file.string(), std::strerror(errno));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int saved = errno;
  ::close(fd);
  if (map == MAP_FAILED) fail("cannot map GGUF file {}: {}", file.string(), std::strerror(saved));
  return std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(map), [size](const uint8_t* p) {
    ::munmap(const_cast<uint8_t*>(p), size);
  });
}

// Every tensor's type, geometry and place in the file, before any byte of data is touched.
void check_tensor(const std::filesystem::path& file, const GgufFile& gguf, GgufTensorInfo& t, uint64_t file_size) {
  const char* name = fast::ggml_type_name(t.type);
  if (!name) fail("GGUF file {}: tensor {} has unknown tensor type {}", file.string(), t.name, t.type);
  if (t.offset % gguf.alignment != 0)
    fail("GGUF file {}: tensor {} is misaligned (offset {} is not a multiple of general.alignment {})", file.string(),
         t.name, t.offset, gguf.alignment);
  const auto block = fast::ggml_block(t.type);
  if (!block) return;  // a type we do not run: refused by the model loader, by name
  uint64_t count = 1;
  for (uint64_t d : t.dims) {
    if (d != 0 && count > UINT64_MAX / d) fail("GGUF file {}: tensor {} has impossible dimensions", file.string(), t.name);
    count *= d;
  }
  if (!t.dims.empty() && t.dims[0] % static_cast<uint64_t>(block->elements) != 0)
    fail("GGUF file {}: tensor {} ({}) has rows of {} weights, not a whole number of {}-weight blocks", file.string(),
         t.name, name, t.dims[0], block->elements);
  if (count / block->elements > UINT64_MAX / block->bytes) fail("GGUF file {}: tensor {} is impossibly large", file.string(), t.name);
  t.bytes = count / block->elements * block->bytes;
  const uint64_t available = file_size - gguf.data_offset;
  if (gguf.data_offset > file_size || t.offset > available || t.bytes > available - t.offset)
    fail("GGUF file {}: tensor {} ({} bytes at offset {}) lies beyond the end of the file ({} bytes): truncated or corrupt",
         file.string(), t.name, t.bytes, gguf.data_offset + t.offset, file_size);
}
}  // namespace

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
  gguf.path = file;
  for (auto& t : gguf.tensors) check_tensor(file, gguf, t, reader.size());
  if (!gguf.tensors.empty()) gguf.map_ = map_file(file, reader.size());
  return gguf;
}

}  // namespace inferlab
