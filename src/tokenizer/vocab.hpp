// A model's vocabulary as its GGUF stores it (the tokenizer.* keys): token
// strings, scores, types, merges, the special ids and the flags that say how
// text becomes ids. Shared by every tokenizer model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cortiq/types.hpp"

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

inline constexpr TokenId kNoToken = -1;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// tokenizer.ggml.model
enum class TokenizerKind {
  none,    // "no_vocab": ids only
  spm,     // "llama": SentencePiece BPE with scores and byte fallback
  bpe,     // "gpt2": byte-level BPE with ranked merges and a pre-tokenizer
  wpm,     // "bert": WordPiece
  gemma4,  // "gemma4"
  ugm,     // "t5": Unigram (T5, XLM-R, nomic-bert-moe), llama.cpp's UGM
  plamo2,  // "plamo2": PLaMo-2's best path by integer scores, byte fallback
  rwkv,    // "rwkv": RWKV world models' greedy longest match over escaped byte tokens
};

struct Vocab {
  TokenizerKind kind = TokenizerKind::none;
  std::string model_name;  // tokenizer.ggml.model as written
  std::string pre;         // tokenizer.ggml.pre ("" when absent)

  std::vector<std::string> tokens;
  std::vector<float> scores;     // empty when the file has none
  std::vector<TokenType> types;  // normal when the file has none
  // The types as the file gave them, before the fix-ups below (end-of-turn
  // texts typed control, ...): llama.cpp builds the Unigram model's token
  // set from these, before it applies the fix-ups. Empty: same as `types`.
  std::vector<TokenType> file_types;
  // tokenizer.ggml.merges split at the first space: (left, right) by rank.
  std::vector<std::pair<std::string, std::string>> merges;

  TokenId bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken, sep = kNoToken,
          cls = kNoToken, mask = kNoToken, eot = kNoToken, eom = kNoToken;
  // Fill-in-the-middle: prefix, suffix, middle, pad, repository, file separator.
  TokenId fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken,
          fim_rep = kNoToken, fim_sep = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_sep =
      false;  // tokenizer.ggml.add_sep_token (WordPiece adds [SEP] regardless, as the peer)
  bool add_space_prefix = false;  // SentencePiece's dummy prefix
  bool remove_extra_whitespaces = false;
  // BERT normalizer (tokenizer.ggml.normalizer.*): uncased models lowercase
  // and strip accents; strip_accents defaults to lowercase, as in the peer.
  bool normalizer_lowercase = true;
  bool normalizer_strip_accents = true;
  // clean_up_tokenization_spaces: decoding drops the space in " ," " ." " 's" ...
  bool clean_spaces = false;
  // tokenizer.ggml.precompiled_charsmap (Unigram only): SentencePiece's
  // normalization rules, checked by from_gguf (see charsmap.hpp). Empty when
  // the file has none: the text is not normalized.
  std::vector<uint8_t> precompiled_charsmap;

  // Whitespace a special token swallows beside it when it is split out of
  // text (Hugging Face's lstrip/rstrip; the GGUF does not store them, so they
  // come from the peer's per-model rules). Empty when no token has any.
  static constexpr uint8_t kStripLeft = 1, kStripRight = 2;
  std::vector<uint8_t> strip;

  // Ids that end a generation, sorted: eos, eot, eom, fim pad/rep/sep and
  // the tokens whose text marks an end of turn (<|im_end|>, <end_of_turn>,
  // <|eot_id|>, ...), as the peer decides.
  std::vector<TokenId> end_of_generation;

  // tokenizer.ggml.suppress_tokens: ids the model must never generate
  // (llama.cpp's sampler bans them; MiniMax-01's converter lists its added
  // tokens whose embeddings are zero, Gemma's its generation config's).
  std::vector<TokenId> suppress_tokens;

  std::unordered_map<std::string, TokenId> token_to_id;

  // Reads and validates the tokenizer.* keys (counts agree, ids in range);
  // throws cortiq::Error naming the key at fault.
  static Vocab from_gguf(const gguf::GgufFile& file);

  size_t size() const { return tokens.size(); }
  // The vocabulary string of a token; empty for kNoToken or an id out of range.
  std::string_view token_text(TokenId id) const {
    return id >= 0 && static_cast<size_t>(id) < tokens.size() ? tokens[static_cast<size_t>(id)]
                                                              : std::string_view();
  }
  std::optional<TokenId> find(std::string_view text) const;
  TokenType type(TokenId id) const;
  bool is_end_of_generation(TokenId id) const;
  // Control and user-defined tokens, matched as whole strings in the text:
  // user-defined ones always, control ones when parsing specials is asked for.
  bool is_special(TokenId id) const;
  // kStripLeft/kStripRight of a token (0 for most).
  uint8_t strip_flags(TokenId id) const;
};

}  // namespace cortiq
