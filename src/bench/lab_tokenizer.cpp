#include "inferlab/bench/lab_tokenizer.h"

#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab::bench {
namespace {

class TokenizerForLab final : public lab::TextTokenizer {
 public:
  explicit TokenizerForLab(std::shared_ptr<const Tokenizer> tokenizer) : tokenizer_(std::move(tokenizer)) {}
  std::vector<int32_t> encode(std::string_view text) const override { return tokenizer_->encode(text); }
  std::string decode(std::span<const int32_t> ids) const override { return tokenizer_->decode(ids); }
  int vocab_size() const override { return tokenizer_->vocab_size(); }
  bool is_special(int32_t id) const override { return tokenizer_->is_special(id); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace

std::shared_ptr<const lab::TextTokenizer> lab_tokenizer(std::shared_ptr<const Tokenizer> tokenizer) {
  if (!tokenizer) return nullptr;
  return std::make_shared<TokenizerForLab>(std::move(tokenizer));
}

}  // namespace inferlab::bench
