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

  const Vocab& vocab() const { return *vocab_; }

  // Throws cortiq::Error for a model without vocabulary (no_vocab).
  std::vector<TokenId> encode(std::string_view text, TokenizeOptions options = {}) const;

  // The bytes of one token (control tokens give their text when
  // `render_special`, else nothing; user-defined tokens always give their
  // text). Throws cortiq::Error for an id outside the vocabulary.
  std::string token_to_piece(TokenId id, bool render_special = false) const;
  // The bytes a token shows in an output: its piece, less the space of
  // SentencePiece's dummy prefix when it is the output's first token.
  std::string output_piece(TokenId id, bool first, bool render_special = false) const;
  // Concatenated pieces; SentencePiece models drop the leading space of the
  // first piece when `remove_leading_space`. The bytes are returned as the
  // tokens give them (byte tokens may leave invalid UTF-8).
  std::string decode(std::span<const TokenId> ids, bool render_special = false,
                     bool remove_leading_space = true) const;

 private:
  // A piece of the input: plain text (token == kNoToken) or a special token.
  struct Fragment {
    TokenId token;
    size_t offset;
    size_t length;
  };
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void split_on(std::string_view text, TokenId special, std::vector<Fragment>& fragments) const;
  void add_prefix(std::vector<TokenId>& out) const;
  void add_suffix(std::vector<TokenId>& out) const;

  // On the heap so that its address, which the model keeps, survives moves.
  std::unique_ptr<const Vocab> vocab_;
  std::unique_ptr<TokenizerModel> model_;
  // Control, user-defined and unknown tokens, longest text first: the order
  // in which they are split out of the input.
  std::vector<TokenId> specials_;
};

// Detokenizes a stream of ids without ever emitting half a UTF-8 character:
// an incomplete tail is held until the next token completes it, and bytes
// that can never form a character come out as U+FFFD, so every returned
// string is valid UTF-8. (The decode-time space clean-up of some BPE models
// is not applied to a stream.)
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
