// BERT WordPiece, matching the peer's llm_tokenizer_wpm:
//
//  1. Normalize per code point: with strip_accents, replace each code point
//     by the FIRST code point of its canonical decomposition (NFD) and drop
//     accent marks (Mn, Mc, Me); drop NUL, U+FFFD and controls (Cc, Cf, Co,
//     Cs); with lowercase, apply the simple lowercase mapping.
//  2. Split on White_Space; punctuation (P*), ASCII symbols and CJK
//     ideographs each become a word of their own.
//  3. Each word, prefixed with "▁", is cut greedily into the longest
//     vocabulary entries. The converted GGUF vocabularies mark word-initial
//     pieces with "▁" and store continuation pieces bare (Hugging Face's
//     "##ing" is "ing" here), so the first piece must start with "▁".
//     A word that cannot be covered entirely becomes [UNK].
//
// Taking only the first code point of the decomposition is the peer's
// simplification (a Hangul syllable keeps only its leading jamo); it is
// kept because the ids must match the peer's. Invalid UTF-8 decodes as
// U+FFFD per bad byte (utf8_decode.hpp), which step 1 drops.
#include "tokenizer/tokenizer_wpm.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <utf8proc.h>

#include "tokenizer/utf8_decode.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kWordPrefix = "\xE2\x96\x81";  // U+2581 "▁"

// The Unicode White_Space property (PropList.txt); utf8proc exposes
// categories only, and Zs alone misses \t, \n, U+0085 and U+2028/9.
bool is_whitespace(char32_t cp) {
  static constexpr std::array<char32_t, 25> kSpaces = {
      0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,   0x1680,
      0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
      0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  return std::binary_search(kSpaces.begin(), kSpaces.end(), cp);
}

// CJK ideograph blocks as BERT lists them (0x2B920 rather than 0x2B820, as
// in Hugging Face's Rust code).
bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool is_control(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
         c == UTF8PROC_CATEGORY_CS;
}

bool is_mark(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool is_punctuation(utf8proc_category_t c) {
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_symbol(utf8proc_category_t c) {
  return c >= UTF8PROC_CATEGORY_SM && c <= UTF8PROC_CATEGORY_SO;
}

// First code point of the canonical decomposition (see the file comment).
char32_t nfd_first(char32_t cp) {
  std::array<utf8proc_int32_t, 16> buf{};
  int boundclass = UTF8PROC_BOUNDCLASS_START;
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf.data(), buf.size(),
                                         UTF8PROC_DECOMPOSE, &boundclass);
  return n >= 1 && static_cast<size_t>(n) <= buf.size() ? static_cast<char32_t>(buf[0]) : cp;
}

class WpmModel final : public TokenizerModel {
 public:
  WpmModel(const Vocab& vocab, WpmNormalizer normalizer)
      : tokens_(vocab.tokens), types_(vocab.types), unk_(vocab.unk), normalizer_(normalizer) {
    types_.resize(tokens_.size(), TokenType::normal);
    ids_.reserve(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
      ids_[tokens_[id]] = static_cast<TokenId>(id);  // a later duplicate wins, as in the peer
      max_token_len_ = std::max(max_token_len_, tokens_[id].size());
    }
  }

  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    std::string word;
    const auto finish_word = [&] {
      if (!word.empty()) encode_word(word, out);
      word.clear();
    };
    for (size_t pos = 0; pos < text.size();) {
      const utf8::Decoded d = utf8::decode(text, pos);
      pos += d.len;
      char32_t cp = normalizer_.strip_accents ? nfd_first(d.cp) : d.cp;
      if (is_whitespace(cp)) {
        finish_word();
        continue;
      }
      const utf8proc_category_t cat = category(cp);
      if (cp == 0 || cp == utf8::kReplacement || is_control(cat)) continue;
      if (normalizer_.strip_accents && is_mark(cat)) continue;
      const bool alone = is_punctuation(cat) || (cp < 0x7F && is_symbol(cat)) || is_cjk(cp);
      if (normalizer_.lowercase) cp = static_cast<char32_t>(utf8proc_tolower(cp));
      if (alone) finish_word();
      utf8::append(word, cp);
      if (alone) finish_word();
    }
    finish_word();
  }

  // Word-initial pieces give their leading space back ("▁the" -> " the").
  // The peer's decode keeps even the first one (WordPiece has no dummy
  // prefix to remove) and then cleans spaces before punctuation.
  std::string token_bytes(TokenId id) const override {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return {};
    const TokenType type = types_[id];
    if (type == TokenType::unused || type == TokenType::undefined) return {};
    if (type != TokenType::normal) return tokens_[id];
    std::string out;
    std::string_view text = tokens_[id];
    for (size_t at; (at = text.find(kWordPrefix)) != std::string_view::npos;) {
      out.append(text.substr(0, at)).push_back(' ');
      text.remove_prefix(at + kWordPrefix.size());
    }
    out.append(text);
    return out;
  }

 private:
  // Greedy longest match first over "▁" + word; all or nothing.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const {
    std::string text;
    text.reserve(kWordPrefix.size() + word.size());
    text.append(kWordPrefix).append(word);
    const size_t first = out.size();
    for (size_t i = 0; i < text.size();) {
      const size_t match = longest_match(text, i, out);
      if (match == 0) {
        out.resize(first);
        break;
      }
      i += match;
    }
    if (out.size() == first && unk_ != kNoToken) out.push_back(unk_);
  }

  // Appends the id of the longest vocabulary entry starting at `i` and
  // returns its length in bytes, or 0 when none does.
  size_t longest_match(std::string_view text, size_t i, std::vector<TokenId>& out) const {
    for (size_t len = std::min(text.size() - i, max_token_len_); len > 0; --len) {
      const auto it = ids_.find(text.substr(i, len));
      if (it != ids_.end()) {
        out.push_back(it->second);
        return len;
      }
    }
    return 0;
  }

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, TokenId> ids_;  // views into tokens_, which never changes
  size_t max_token_len_ = 0;
  TokenId unk_;
  WpmNormalizer normalizer_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_wpm_model(const Vocab& vocab, WpmNormalizer normalizer) {
  return std::make_unique<WpmModel>(vocab, normalizer);
}

std::unique_ptr<TokenizerModel> make_wpm_model(const Vocab& vocab) {
  return make_wpm_model(vocab, WpmNormalizer{});
}

}  // namespace cortiq
