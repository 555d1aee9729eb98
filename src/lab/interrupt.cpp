// The SIGINT/SIGTERM latch of the measurement loops (see interrupt.h).
#include "lab/interrupt.h"

#include <atomic>
#include <csignal>

namespace inferlab::lab {
namespace {

std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int signal) {
  g_signal = signal;
  std::signal(signal, SIG_DFL);  // the second one kills
}

}  // namespace

InterruptScope::InterruptScope() {
  g_signal = 0;
  previous_int_ = std::signal(SIGINT, on_stop_signal);
  previous_term_ = std::signal(SIGTERM, on_stop_signal);
}

InterruptScope::~InterruptScope() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

int InterruptScope::signal() const { return g_signal.load(); }

const char* InterruptScope::name() const {
  switch (g_signal.load()) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case 0: return "";
    default: return "a signal";
  }
}

}  // namespace inferlab::lab
