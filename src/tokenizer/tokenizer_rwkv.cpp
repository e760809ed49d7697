// The RWKV "world" tokenizer (tokenizer.ggml.model = "rwkv": RWKV-6 and
// RWKV-7 files), as llama.cpp's llm_tokenizer_rwkv:
//
//  1. The converter keeps tokens that are arbitrary bytes in GGUF's string
//     array by storing each escaped, as Python's repr(bytes)[2:-1] writes it
//     ("\n", "\xe4", "\\", "\'"); unescaping gives the bytes a token stands
//     for, both to match text and to decode.
//  2. Every token's bytes, whatever its type, go into one byte trie in id
//     order, so that of two tokens with the same bytes the later id wins.
//  3. Encoding is greedy over raw bytes: from each position, the longest
//     token whose bytes start there; no scores, no normalization, no
//     pre-tokenizer. Nothing is added: the model never gets BOS or EOS from
//     the tokenizer (Tokenizer::add_prefix knows).
//
// Where no token matches at a position (a byte no token starts with, or
// only longer tokens start with it), llama.cpp pushes the unknown id, -1
// when the file sets none, or, in the second case, starts the fragment over
// and never ends. Here both cases are the same: the unknown token stands
// for that one byte, and without one encoding fails with an error naming
// the byte rather than emit an id outside the vocabulary, as the
// SentencePiece model does for a byte with no token. Real "world"
// vocabularies have a token for each of the 256 bytes and never get here.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/byte_trie.hpp"
#include "base/error.hpp"
#include "base/strings.hpp"
#include "tokenizer/tokenizer_model.hpp"

namespace cortiq {

namespace {

// llama.cpp's llama_unescape_rwkv_token, character for character: \t \n \r
// are control characters, \xHH a byte, a backslash before anything else
// that character; an escape cut short at the end gives nothing.
//
// A hex digit is decoded as llama.cpp does, c >= 'a' ? c - 'a' + 10 :
// c - '0' in 8-bit arithmetic, without checking: "\xA0" is 0x10, not 0xA0,
// and "\x4A" is 'Q'. The converter writes lowercase hex only, so real files
// never notice; a hand-made file must get the same bytes as in the peer.
// The character is taken as signed, as x86's char is, so that a non-ASCII
// byte after "\x" decodes the same on every platform.
std::string unescape(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  bool escaping = false;
  int hex_remaining = 0;
  uint8_t hex = 0;
  for (const char ch : escaped) {
    if (hex_remaining > 0) {
      const int c = static_cast<signed char>(ch);
      const auto digit = static_cast<uint8_t>(c >= 'a' ? c - 'a' + 10 : c - '0');
      hex = static_cast<uint8_t>((hex << 4) + digit);
      if (--hex_remaining == 0) {
        out.push_back(static_cast<char>(hex));
        hex = 0;
      }
      continue;
    }
    if (escaping) {
      escaping = false;
      switch (ch) {
        case 't':
          out.push_back('\t');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'x':
          hex_remaining = 2;
          break;
        default:
          out.push_back(ch);
          break;
      }
      continue;
    }
    if (ch == '\\') {
      escaping = true;
      continue;
    }
    out.push_back(ch);
  }
  return out;
}

std::vector<std::string> unescape_all(const Vocab& vocab) {
  std::vector<std::string> bytes;
  bytes.reserve(vocab.size());
  for (const std::string& text : vocab.tokens) bytes.push_back(unescape(text));
  return bytes;
}

// Every token by its bytes. A token whose text unescapes to nothing keys the
// root, where no match is ever looked up (as in the peer's trie).
ByteTrie trie_of(const std::vector<std::string>& bytes) {
  std::vector<std::pair<std::string_view, TokenId>> keys;
  keys.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) keys.emplace_back(bytes[i], static_cast<TokenId>(i));
  return ByteTrie(std::move(keys));
}

class RwkvModel final : public TokenizerModel {
 public:
  explicit RwkvModel(const Vocab& vocab)
      : unk_(vocab.unk), bytes_(unescape_all(vocab)), trie_(trie_of(bytes_)) {}

  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    size_t pos = 0;
    while (pos < text.size()) {
      // The last node along the text's path that ends a token: the longest
      // match, not merely the deepest node the path reaches.
      TokenId best = kNoToken;
      size_t best_end = pos;
      uint32_t node = ByteTrie::kRoot;
      for (size_t i = pos; i < text.size(); ++i) {
        node = trie_.child(node, static_cast<uint8_t>(text[i]));
        if (node == ByteTrie::kNone) break;
        if (const TokenId id = trie_.value(node); id != kNoToken) {
          best = id;
          best_end = i + 1;
        }
      }
      if (best == kNoToken) {
        out.push_back(unknown(static_cast<uint8_t>(text[pos])));
        ++pos;
        continue;
      }
      out.push_back(best);
      pos = best_end;
    }
  }

  std::string token_bytes(TokenId id) const override {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? bytes_[static_cast<size_t>(id)]
                                                              : std::string();
  }

 private:
  TokenId unknown(uint8_t byte) const {
    if (unk_ == kNoToken) {
      throw Error(
          strfmt("rwkv tokenizer: no token matches the text at byte 0x%02X, and the "
                 "vocabulary has no unknown token (tokenizer.ggml.unknown_token_id) to "
                 "stand for it",
                 byte));
    }
    return unk_;
  }

  TokenId unk_;
  std::vector<std::string> bytes_;  // by id: the unescaped bytes
  ByteTrie trie_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_rwkv_model(const Vocab& vocab) {
  return std::make_unique<RwkvModel>(vocab);
}

}  // namespace cortiq
