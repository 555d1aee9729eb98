// safetensors files: a memory-mapped reader that validates the header against the file, and a
// streaming writer. Plus TensorSource: "find a tensor by its HF name" over one or many files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/tensor/float16.h"

namespace inferlab {

// U8: raw bytes (MXFP4 checkpoints' *_blocks and *_scales), read by the architecture that knows them.
enum class DType { F32, F16, BF16, U8 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // safetensors spelling: "F32", "F16", "BF16", "U8"
std::optional<DType> parse_dtype(const std::string& name);  // also accepts f32/bf16/f16/float32...


// A tensor's bytes in the stored dtype, plus where it came from (for error messages).
struct TensorView {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
  std::string origin;  // file it lives in
  // >= 0: a GGUF tensor in this ggml type (tensor/fast/ggml_blocks.h): rows of ggml blocks along
  // the last dimension; dtype is then not used.
  int ggml_type = -1;

  int64_t numel() const;
  // Converted to fp32 (a copy).
  std::vector<float> to_f32() const;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[3, 4]"

class SafetensorsFile {
 public:
  // Throws Error naming the file on a truncated file, a header length beyond the file, bad JSON,
  // unsupported dtype, or offsets outside the data section.
  explicit SafetensorsFile(const std::filesystem::path& file);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> names() const;
  // A tensor by name, or by a name __metadata__ records as an alias of one (safetensors' save_model
  // keeps a tensor shared under two names once: {"lm_head.weight": "model.embed_tokens.weight"}).
  std::optional<TensorView> find(const std::string& name) const;

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> aliases_;  // a dropped name -> the stored tensor's name
};

// Where weights come from: the safetensors files of an HF folder, or tensors built in memory
// (a llama2.c checkpoint renamed to HF names).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::optional<TensorView> find(const std::string& name) const = 0;
  virtual std::string describe() const = 0;  // for "not found in ..." messages
  // Throws Error naming the tensor and where it was looked for.
  TensorView require(const std::string& name) const;
  // require()'s message for a tensor that is not there.
  virtual std::string missing(const std::string& name) const;
};

// model.safetensors.index.json when present, else every *.safetensors in the folder.
std::unique_ptr<TensorSource> open_safetensors_folder(const std::filesystem::path& folder);

// Tensors owned in memory (fp32).
class MemoryTensorSource : public TensorSource {
 public:
  explicit MemoryTensorSource(std::string origin) : origin_(std::move(origin)) {}
  void add(const std::string& name, std::vector<int64_t> shape, std::vector<float> data);
  std::optional<TensorView> find(const std::string& name) const override;
  std::string describe() const override { return origin_; }

 private:
  struct Stored {
    std::vector<int64_t> shape;
    std::vector<float> data;
  };
  std::string origin_;
  std::map<std::string, Stored> tensors_;
};

// Writes tensors one at a time (the whole model never sits in memory twice).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Fills `out` (numel floats); converted to dtype on write.
  std::function<void(std::vector<float>& out)> fill;
};
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace inferlab
