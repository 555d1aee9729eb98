// A public lab header naming the engine: the checker must report this line.
#include "inferlab/generation/engine.h"
