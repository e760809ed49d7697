#include "runtime/text_output.hpp"

namespace cortiq {

TextOutput::TextOutput(const Tokenizer& tokenizer, const std::vector<std::string>& stops)
    : has_text_(tokenizer.vocab().kind != TokenizerKind::none),
      vocab_size_(static_cast<TokenId>(tokenizer.vocab().size())),
      decoder_(tokenizer),
      stops_(stops) {}

std::string TextOutput::push(TokenId id) {
  if (!has_text_ || stops_.stopped() || id >= vocab_size_) return {};
  auto r = stops_.push(decoder_.push(id));
  return std::move(r.emit);
}

std::string TextOutput::flush() {
  if (!has_text_ || stops_.stopped()) return {};
  auto r = stops_.push(decoder_.flush());
  return r.stopped ? std::move(r.emit) : r.emit + stops_.flush();
}

}  // namespace cortiq
