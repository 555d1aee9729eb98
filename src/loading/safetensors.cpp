#include "inferlab/loading/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {

std::size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : dtype == DType::U8 ? 1 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), ::tolower);
  if (n == "f32" || n == "float32" || n == "fp32" || n == "float") return DType::F32;
  if (n == "bf16" || n == "bfloat16") return DType::BF16;
  if (n == "f16" || n == "float16" || n == "fp16" || n == "half") return DType::F16;
  return std::nullopt;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> TensorView::to_f32() const {
  const auto n = static_cast<std::size_t>(numel());
  std::vector<float> out(n);
  if (ggml_type >= 0) {
    const int64_t row = shape.empty() ? 1 : shape.back();
    const std::size_t row_bytes = fast::ggml_row_bytes(static_cast<uint32_t>(ggml_type), row);
    for (std::size_t r = 0; row > 0 && r < n / static_cast<std::size_t>(row); ++r)
      fast::dequantize_ggml_row(static_cast<uint32_t>(ggml_type), static_cast<const uint8_t*>(data) + r * row_bytes, row,
                                out.data() + r * row);
  } else if (dtype == DType::F32) {
    if (n) std::memcpy(out.data(), data, n * 4);  // an empty tensor's data may be null
  } else if (dtype == DType::U8) {
    const auto* src = static_cast<const uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i) out[i] = src[i];
  } else {
    const auto* src = static_cast<const uint16_t*>(data);
    if (dtype == DType::BF16)
      for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
    else
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Bigger than any real header (the largest models' headers are a few MB); stops absurd allocations.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

SafetensorsFile::SafetensorsFile(const fs::path& file) : path_(file) {
  const std::string where = file.string();
  int fd = ::open(where.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open safetensors file {}: {}", where, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat {}: {}", where, std::strerror(errno));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail("{}: truncated safetensors file ({} bytes; needs at least the 8-byte header length)", where, size_);
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("cannot memory-map {}: {}", where, std::strerror(errno));
  }
  try {
    const auto* bytes = static_cast<const unsigned char*>(map_);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
    if (header_len > size_ - 8)
      fail("{}: header length {} goes beyond the end of the file ({} bytes): truncated or not a safetensors file",
           where, header_len, size_);
    if (header_len > kMaxHeaderBytes) fail("{}: header length {} is implausibly large", where, header_len);
    json header;
    try {
      header = json::parse(bytes + 8, bytes + 8 + header_len);
    } catch (const json::exception& e) {
      fail("{}: safetensors header is not valid JSON: {}", where, e.what());
    }
    if (!header.is_object()) fail("{}: safetensors header is not a JSON object", where);
    const std::size_t data_start = 8 + header_len;
    const std::size_t data_size = size_ - data_start;
    for (auto& [name, info] : header.items()) {
      if (name == "__metadata__") continue;  // free-form strings, not a tensor
      if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets") ||
          !info["dtype"].is_string() || !info["shape"].is_array() || !info["data_offsets"].is_array() ||
          info["data_offsets"].size() != 2)
        fail("{}: tensor '{}' has a malformed header entry (needs dtype, shape, data_offsets)", where, name);
      TensorView view;
      const std::string dtype = info["dtype"].get<std::string>();
      // The integer index buffers BERT-family checkpoints keep beside their weights
      // (embeddings.position_ids [1, 512] I64): never read, so not served.
      const bool index_buffer = name.ends_with("position_ids") || name.ends_with("token_type_ids");
      if (index_buffer && (dtype == "I64" || dtype == "I32")) continue;
      if (dtype == "F32") view.dtype = DType::F32;
      else if (dtype == "F16") view.dtype = DType::F16;
      else if (dtype == "BF16") view.dtype = DType::BF16;
      else if (dtype == "U8") view.dtype = DType::U8;
      else fail("{}: tensor '{}' has unsupported dtype {} (supported: F32, F16, BF16, U8)", where, name, dtype);
      uint64_t numel = 1;
      for (const auto& d : info["shape"]) {
        if (!d.is_number_unsigned()) fail("{}: tensor '{}' has a non-integer or negative dimension", where, name);
        const uint64_t dim = d.get<uint64_t>();
        if (dim != 0 && numel > (uint64_t{1} << 48) / dim) fail("{}: tensor '{}' shape is too large", where, name);
        numel *= dim;
        view.shape.push_back(static_cast<int64_t>(dim));
      }
      const auto& offsets = info["data_offsets"];
      if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
        fail("{}: tensor '{}' has invalid data_offsets", where, name);
      const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
      if (end < begin) fail("{}: tensor '{}' data_offsets [{}, {}) run backwards", where, name, begin, end);
      if (end > data_size)
        fail("{}: tensor '{}' data [{}, {}) extends beyond the data section ({} bytes): the file is truncated", where,
             name, begin, end, data_size);
      if (end - begin != numel * dtype_size(view.dtype))
        fail("{}: tensor '{}' holds {} bytes but shape {} of {} needs {}", where, name, end - begin,
             shape_string(view.shape), dtype, numel * dtype_size(view.dtype));
      view.data = bytes + data_start + begin;
      view.bytes = end - begin;
      view.origin = where;
      tensors_.emplace(name, std::move(view));
    }
    // safetensors' save_model stores a tensor shared under two names once and records the name it
    // dropped in __metadata__ ({"lm_head.weight": "model.embed_tokens.weight"}): such a name is
    // found as the tensor it names. Other metadata ("format": "pt") names no tensor and is ignored.
    if (auto metadata = header.find("__metadata__"); metadata != header.end() && metadata->is_object())
      for (auto& [name, target] : metadata->items())
        if (target.is_string() && !tensors_.count(name) && tensors_.count(target.get<std::string>()))
          aliases_.emplace(name, target.get<std::string>());
  } catch (...) {
    ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

std::optional<TensorView> SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    auto alias = aliases_.find(name);
    if (alias == aliases_.end()) return std::nullopt;
    it = tensors_.find(alias->second);
  }
  return it->second;
}

TensorView TensorSource::require(const std::string& name) const {
  auto view = find(name);
  if (!view) fail("{}", missing(name));
  return *view;
}

std::string TensorSource::missing(const std::string& name) const {
  return fmt::format("tensor '{}' not found in {}", name, describe());
}

namespace {

class FolderSource : public TensorSource {
 public:
  explicit FolderSource(const fs::path& folder) : folder_(folder) {
    std::vector<fs::path> files;
    const fs::path index = folder / "model.safetensors.index.json";
    if (fs::exists(index)) {
      json j;
      try {
        std::ifstream in(index);
        j = json::parse(in);
      } catch (const json::exception& e) {
        fail("{}: not valid JSON: {}", index.string(), e.what());
      }
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        fail("{}: missing \"weight_map\" object", index.string());
      std::set<std::string> shard_names;
      for (auto& [tensor, shard] : j["weight_map"].items()) {
        if (!shard.is_string()) fail("{}: weight_map entry '{}' is not a file name", index.string(), tensor);
        shard_names.insert(shard.get<std::string>());
      }
      for (const auto& shard : shard_names) {
        if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
          fail("{}: shard name '{}' must be a plain file name", index.string(), shard);
        if (!fs::exists(folder / shard)) fail("{} names shard {} which is missing", index.string(), (folder / shard).string());
        files.push_back(folder / shard);
      }
    } else {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(folder, ec))
        if (entry.path().extension() == ".safetensors") files.push_back(entry.path());
      std::sort(files.begin(), files.end());
    }
    if (files.empty()) fail("no *.safetensors files in {}", folder.string());
    for (const auto& file : files) files_.push_back(std::make_unique<SafetensorsFile>(file));
  }

  std::optional<TensorView> find(const std::string& name) const override {
    for (const auto& file : files_)
      if (auto view = file->find(name)) return view;
    return std::nullopt;
  }

  std::string describe() const override {
    std::string s;
    for (const auto& file : files_) s += (s.empty() ? "" : ", ") + file->path().string();
    return s;
  }

 private:
  fs::path folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace

std::unique_ptr<TensorSource> open_safetensors_folder(const fs::path& folder) {
  return std::make_unique<FolderSource>(folder);
}

void MemoryTensorSource::add(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
  tensors_[name] = Stored{std::move(shape), std::move(data)};
}

std::optional<TensorView> MemoryTensorSource::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  TensorView view;
  view.dtype = DType::F32;
  view.shape = it->second.shape;
  view.data = it->second.data.data();
  view.bytes = it->second.data.size() * 4;
  view.origin = origin_;
  return view;
}

void write_safetensors(const fs::path& file, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<uint64_t>(d);
    const uint64_t bytes = numel * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8) text.push_back(' ');  // data section 8-byte aligned, as HF writes it
  std::ofstream out(file, std::ios::binary);
  if (!out) fail("cannot write {}", file.string());
  unsigned char len[8];
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<float> values;
  std::vector<uint16_t> halves;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (auto d : t.shape) numel *= static_cast<uint64_t>(d);
    values.assign(numel, 0.0f);
    t.fill(values);
    if (t.dtype == DType::F32) {
      out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(numel * 4));
    } else if (t.dtype == DType::U8) {  // the fill's values are bytes 0..255
      std::vector<uint8_t> bytes(numel);
      for (uint64_t i = 0; i < numel; ++i) bytes[i] = static_cast<uint8_t>(std::clamp(values[i], 0.0f, 255.0f));
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(numel));
    } else {
      halves.resize(numel);
      for (uint64_t i = 0; i < numel; ++i) halves[i] = t.dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      out.write(reinterpret_cast<const char*>(halves.data()), static_cast<std::streamsize>(numel * 2));
    }
  }
  if (!out) fail("writing {} failed (disk full?)", file.string());
}

}  // namespace inferlab
