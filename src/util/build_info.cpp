#include "inferlab/util/build_info.h"

// src/CMakeLists.txt defines both for this file alone, so a new commit recompiles only it.
#ifndef INFERLAB_VERSION
#error "INFERLAB_VERSION is set by src/CMakeLists.txt"
#endif
#ifndef INFERLAB_GIT_COMMIT
#error "INFERLAB_GIT_COMMIT is set by src/CMakeLists.txt"
#endif

namespace inferlab {

const char* inferlab_version() { return INFERLAB_VERSION; }
const char* inferlab_git_commit() { return INFERLAB_GIT_COMMIT; }

}  // namespace inferlab
