#include "inferlab/util/error.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace inferlab {

StreamDecoder::StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special_tokens) {
  if (!tokenizer_) fail("StreamDecoder needs a tokenizer");
}

std::string StreamDecoder::push(int32_t id) {
  std::span<const int32_t> one(&id, 1);
  pending_ += started_ ? tokenizer_->decode_bytes_after(one, skip_special_) : tokenizer_->decode_bytes(one, skip_special_);
  if (!(skip_special_ && tokenizer_->is_special(id))) started_ = true;
  // Hold back only a trailing sequence that more bytes could still complete; everything before
  // it decodes the same now as in the full text (a lead byte never continues an earlier sequence).
  std::size_t ready = utf8::complete_prefix_length(pending_);
  std::string out = utf8::to_valid_lossy(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::to_valid_lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace inferlab
