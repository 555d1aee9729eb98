// A model graph calling a CPU kernel directly, past the backend seam: the checker must report it.
#include "inferlab/backend/backend.h"
#include "inferlab/tensor/kernel.h"
