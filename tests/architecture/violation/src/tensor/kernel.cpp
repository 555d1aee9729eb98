// The kernel layer reaching up into the model: the checker must report this line.
#include "inferlab/model/model.h"
#include "inferlab/tensor/kernel.h"
