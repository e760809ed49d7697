// Turns generated tokens into the text a user sees: UTF-8-safe pieces (a
// character split over tokens waits for its last byte), with stop strings
// cut out (text matching one is never emitted). Models without a vocabulary
// produce no text.
#pragma once

#include <string>
#include <vector>

#include "runtime/stop_strings.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

class TextOutput {
 public:
  TextOutput(const Tokenizer& tokenizer, const std::vector<std::string>& stops);

  // The text this token completes (empty when held back).
  std::string push(TokenId id);
  // What is still held back, at the end of the generation.
  std::string flush();
  // A stop string matched: nothing more is emitted.
  bool stopped() const { return stops_.stopped(); }

 private:
  bool has_text_;
  TokenId vocab_size_;
  StreamDecoder decoder_;
  StopStringMatcher stops_;
};

}  // namespace cortiq
