// One tokenizer model (SentencePiece, byte-level BPE, WordPiece, ...): turns
// a fragment of plain text (no special tokens in it) into ids, and an id
// back into the bytes it stands for. The Tokenizer (tokenizer.hpp) does the
// rest: splitting out special tokens, BOS/EOS, detokenizing.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace cortiq {

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;

  // Appends the ids of `text` to `out`. `text` may hold any bytes, invalid
  // UTF-8 included; `at_start` is true when the fragment begins the input or
  // follows a special token (SentencePiece adds its dummy prefix then).
  virtual void encode(std::string_view text, bool at_start, std::vector<TokenId>& out) const = 0;

  // The bytes a non-special token stands for (e.g. "▁the" -> " the" for
  // SentencePiece, byte-level BPE mapped back to raw bytes, "<0x0A>" -> "\n").
  virtual std::string token_bytes(TokenId id) const = 0;
};

// One factory per model; each lives in its own file (tokenizer_spm.cpp, ...).
// A factory throws cortiq::Error when the vocabulary lacks what its model
// needs (Vocab::from_gguf checks the same, naming the key).
std::unique_ptr<TokenizerModel> make_spm_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_bpe_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_wpm_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_gemma4_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_ugm_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_plamo2_model(const Vocab& vocab);
std::unique_ptr<TokenizerModel> make_rwkv_model(const Vocab& vocab);

}  // namespace cortiq
