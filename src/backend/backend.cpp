#include "inferlab/backend/backend.h"

namespace inferlab {

std::size_t kv_element_bytes(KVType type) { return type == KVType::F16 ? sizeof(uint16_t) : sizeof(float); }

}  // namespace inferlab
