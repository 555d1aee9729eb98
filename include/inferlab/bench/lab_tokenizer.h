// The model's tokenizer as the lab's TextTokenizer (inferlab/lab/text_tokenizer.h): the one place
// where the load generator meets tokenizer code, so the lab itself links none.
#pragma once
#include <memory>

#include "inferlab/lab/text_tokenizer.h"

namespace inferlab {
class Tokenizer;
}

namespace inferlab::bench {

std::shared_ptr<const lab::TextTokenizer> lab_tokenizer(std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace inferlab::bench
