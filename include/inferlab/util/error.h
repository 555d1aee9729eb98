// Errors that reach a user: one exception type whose message says what to fix.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace inferlab {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// throw Error(fmt::format(...)) in one call: fail("no such file: {}", path)
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace inferlab
