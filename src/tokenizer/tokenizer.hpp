// Text <-> token ids for a model, exactly as the model was trained: the
// vocabulary and tokenizer model come from the GGUF's tokenizer.* keys.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_model.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {

struct TokenizeOptions {
  bool add_special = true;     // BOS/EOS as the metadata says
  bool parse_special = false;  // match control/user-defined tokens in the text
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  static Tokenizer from_gguf(const gguf::GgufFile& file);

  const Vocab& vocab() const { return vocab_; }

  std::vector<TokenId> encode(std::string_view text, TokenizeOptions options = {}) const;

  // The bytes of one token (special tokens give their text when
  // `render_special`, else nothing).
  std::string token_to_piece(TokenId id, bool render_special = false) const;
  // Concatenated pieces; SentencePiece models drop the leading space of the
  // first piece when `remove_leading_space`.
  std::string decode(std::span<const TokenId> ids, bool render_special = false,
                     bool remove_leading_space = true) const;

 private:
  Vocab vocab_;
  std::unique_ptr<TokenizerModel> model_;
};

// Detokenizes a stream of ids without ever emitting half a UTF-8 character:
// an incomplete tail is held until the next token completes it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false);
  // The text that became complete with this token (may be empty).
  std::string push(TokenId id);
  // Whatever is still held (invalid or truncated bytes as U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace cortiq
