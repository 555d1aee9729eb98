// Allowed: model may include tensor.
#include "inferlab/tensor/kernel.h"
#include "model/internal.h"
