// What this binary was built from, for bench reports and /server_info: the project version and the git
// commit CMake saw at configure time ("unknown" outside a git checkout).
#pragma once

namespace inferlab {

const char* inferlab_version();
const char* inferlab_git_commit();

}  // namespace inferlab
