// Names the calling thread (what top -H, perf and /proc/PID/task/*/comm show), so a server's
// threads can be told apart: engine, http-io, compute-N, housekeeping.
#pragma once

namespace inferlab {

// Linux keeps 15 bytes of a name; a longer one is cut there.
void name_this_thread(const char* name);

}  // namespace inferlab
