// Ctrl-C (SIGINT) or SIGTERM during a measurement ends it early but keeps what it measured: the
// run loop polls `signal()` and stops; a second signal of the same kind kills as usual.
#pragma once

namespace inferlab::lab {

class InterruptScope {
 public:
  InterruptScope();   // installs the handlers for SIGINT and SIGTERM
  ~InterruptScope();  // restores the previous ones
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  int signal() const;       // 0 until a signal arrived, then its number
  const char* name() const; // "SIGINT", "SIGTERM" ("" before)

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

}  // namespace inferlab::lab
