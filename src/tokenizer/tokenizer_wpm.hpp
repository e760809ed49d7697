// BERT WordPiece (tokenizer.ggml.model = "bert") as the peer runs it; see
// tokenizer_wpm.cpp. The Tokenizer passes the BertNormalizer options read
// into the Vocab (tokenizer.ggml.normalizer.{lowercase,strip_accents}).
#pragma once

#include <memory>

#include "tokenizer/tokenizer_model.hpp"

namespace cortiq {

struct WpmNormalizer {
  bool lowercase = true;      // tokenizer.ggml.normalizer.lowercase (peer default: true)
  bool strip_accents = true;  // ...strip_accents (peer default: same as lowercase)
};

// make_wpm_model(vocab) is this with the defaults (uncased BERT).
std::unique_ptr<TokenizerModel> make_wpm_model(const Vocab& vocab, WpmNormalizer normalizer);

}  // namespace cortiq
