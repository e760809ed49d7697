// Unigram (tokenizer.ggml.model = "t5"): T5, XLM-R, nomic-bert-moe. The ids
// equal llama.cpp's (llm_tokenizer_ugm), step for step:
//
//  1. Normalize the fragment, one prefix at a time: a prefix that follows a
//     path of the user-defined tokens' trie is kept as it is (llama.cpp
//     takes the longest *path*, whole token or not); else the longest rule
//     of the precompiled charsmap replaces its input; else one UTF-8
//     character is kept (a structurally valid one, overlongs and surrogates
//     included), or one bad byte becomes U+FFFD.
//  2. Spaces (bytes 0x20 of the normalized text) become "▁". With
//     add_space_prefix a "▁" goes before the first non-space byte; with
//     remove_extra_whitespaces runs of spaces collapse to one "▁" before the
//     next word and trailing ones vanish. Every fragment is normalized on
//     its own, so the prefix also follows each user-defined token.
//     (escape_whitespaces and treat_whitespace_as_suffix are fixed for t5:
//     llama.cpp reads no key for them.)
//  3. Viterbi over the normalized bytes, one UTF-8 character per step:
//     every token (normal, user-defined, unused) that starts at the step
//     extends the best path there by its score (user-defined tokens score
//     0); a character that no token covers whole is the unknown token,
//     scored (lowest normal score - 10). Sums are doubles; a challenger must
//     be strictly better, so among paths of equal sum to a position the one
//     whose last token starts earliest stays, and a token beats the unknown
//     token over the same character.
//  4. Back from the end along the best path; runs of unknown tokens merge
//     into one.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/byte_trie.hpp"
#include "base/error.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"
#include "tokenizer/charsmap.hpp"
#include "tokenizer/tokenizer_model.hpp"
#include "tokenizer/utf8_decode.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";    // U+2581 "▁"
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
// llama.cpp's unknown_token_score_penalty.
constexpr float kUnknownPenalty = 10.0f;

std::vector<std::pair<std::string_view, TokenId>> keys_of(const Vocab& vocab, auto&& wanted) {
  std::vector<std::pair<std::string_view, TokenId>> keys;
  const std::vector<TokenType>& types = vocab.file_types.empty() ? vocab.types : vocab.file_types;
  for (TokenId id = 0; id < static_cast<TokenId>(vocab.size()); ++id) {
    if (wanted(types[id])) keys.emplace_back(vocab.tokens[id], id);
  }
  return keys;
}

class UgmModel final : public TokenizerModel {
 public:
  explicit UgmModel(const Vocab& vocab)
      : vocab_(vocab),
        charsmap_(vocab.precompiled_charsmap.empty()
                      ? PrecompiledCharsmap()
                      : PrecompiledCharsmap(vocab.precompiled_charsmap)),
        tokens_(keys_of(vocab,
                        [](TokenType t) {
                          return t == TokenType::normal || t == TokenType::user_defined ||
                                 t == TokenType::unused;
                        })),
        user_defined_(keys_of(vocab, [](TokenType t) { return t == TokenType::user_defined; })) {
    if (vocab.scores.size() != vocab.size() || vocab.types.size() != vocab.size()) {
      throw Error(
          "the t5 Unigram model needs tokenizer.ggml.scores and token types (one per token)");
    }
    if (vocab.unk == kNoToken) throw Error("the t5 Unigram model needs an unknown token");
    const std::vector<TokenType>& types = vocab.file_types.empty() ? vocab.types : vocab.file_types;
    float min_score = FLT_MAX;
    for (size_t id = 0; id < vocab.size(); ++id) {
      if (types[id] == TokenType::normal) min_score = std::min(min_score, vocab.scores[id]);
    }
    // In float, as llama.cpp computes it.
    unknown_score_ = min_score - kUnknownPenalty;
  }

  // Every fragment is normalized alone, the dummy prefix included, so
  // `at_start` plays no part (llama.cpp's UGM session ignores what precedes).
  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    const std::string normalized = normalize(text);
    if (normalized.empty()) return;
    const std::vector<Step> best = viterbi(normalized);
    const size_t first = out.size();
    bool previous_unknown = false;
    for (size_t end = normalized.size();;) {
      const Step& step = best[end];
      const bool unknown = step.token == vocab_.unk;
      if (!(previous_unknown && unknown)) out.push_back(step.token);
      if (step.start == 0) break;
      previous_unknown = unknown;
      end = step.start;
    }
    std::reverse(out.begin() + static_cast<ptrdiff_t>(first), out.end());
  }

  // Normal tokens with "▁" as spaces; byte tokens <0xXX> as their byte.
  std::string token_bytes(TokenId id) const override {
    if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) return {};
    const std::string& text = vocab_.tokens[id];
    if (vocab_.type(id) == TokenType::byte) {
      if (text.size() == 6 && starts_with(text, "<0x") && text[5] == '>') {
        int64_t byte = 0;
        for (const char c : text.substr(3, 2)) {
          const int digit = (c >= '0' && c <= '9')   ? c - '0'
                            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                     : -1;
          if (digit < 0) return {};
          byte = byte * 16 + digit;
        }
        return std::string(1, static_cast<char>(byte));
      }
      return {};
    }
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = text.find(kSpaceMark, pos)) != std::string::npos;
         pos = hit + kSpaceMark.size()) {
      out.append(text, pos, hit - pos).push_back(' ');
    }
    return out.append(text, pos);
  }

 private:
  // The best path to a position of the normalized text: its last token and
  // where that token starts.
  struct Step {
    TokenId token;
    size_t start;
    double score;
  };

  // A piece of normalized text and the input bytes it stands for.
  struct Chunk {
    std::string_view text;
    size_t consumed;
  };

  Chunk normalize_prefix(std::string_view input, size_t pos) const {
    const std::string_view rest = input.substr(pos);
    if (const size_t n = user_defined_.path_length(rest); n > 0) return {rest.substr(0, n), n};
    if (const PrecompiledCharsmap::Match m = charsmap_.longest_match(rest); m.consumed > 0) {
      return {m.replacement, m.consumed};
    }
    if (const size_t n = utf8::structural_length(input, pos); n > 0) return {rest.substr(0, n), n};
    return {kReplacement, 1};
  }

  std::string normalize(std::string_view input) const {
    // t5's fixed flags, kept by name so the rules below read as llama.cpp's.
    constexpr bool kEscapeWhitespaces = true;
    constexpr bool kWhitespaceAsSuffix = false;
    const std::string_view space = kEscapeWhitespaces ? kSpaceMark : std::string_view(" ");
    const bool prepend_space = !kWhitespaceAsSuffix && vocab_.add_space_prefix;
    const bool append_space = kWhitespaceAsSuffix && vocab_.add_space_prefix;
    const bool merge_spaces = vocab_.remove_extra_whitespaces;

    std::string out;
    out.reserve(input.size() * 3);
    bool space_prepended = false;
    bool in_word = false;
    for (size_t pos = 0; pos < input.size();) {
      const Chunk chunk = normalize_prefix(input, pos);
      for (const char c : chunk.text) {
        if (c != ' ') {
          if (!in_word) {
            in_word = true;
            if ((prepend_space && !space_prepended) || merge_spaces) {
              out.append(space);
              space_prepended = true;
            }
          }
          out.push_back(c);
        } else {
          in_word = false;
          if (!merge_spaces) out.append(space);
        }
      }
      pos += chunk.consumed;
    }
    if (append_space) out.append(space);
    return out;
  }

  std::vector<Step> viterbi(std::string_view text) const {
    const size_t n = text.size();
    std::vector<Step> best(n + 1, Step{vocab_.unk, 0, -DBL_MAX});
    best[0].score = 0;
    for (size_t start = 0; start < n;) {
      const size_t char_length =
          std::min(utf8_sequence_length(static_cast<unsigned char>(text[start])), n - start);
      const double score_here = best[start].score;
      bool whole_character_token = false;
      uint32_t node = ByteTrie::kRoot;
      for (size_t end = start; end < n;) {
        node = tokens_.child(node, static_cast<uint8_t>(text[end++]));
        if (node == ByteTrie::kNone) break;
        const TokenId token = tokens_.value(node);
        if (token == kNoToken) continue;
        if (end - start == char_length) whole_character_token = true;
        // User-defined tokens score 0 (normal scores are log probabilities,
        // so they are preferred); the type is read as it is now.
        const double token_score =
            vocab_.type(token) == TokenType::user_defined ? 0.0 : vocab_.scores[token];
        const double score = score_here + token_score;
        if (score > best[end].score) best[end] = {token, start, score};
      }
      if (!whole_character_token) {
        const double score = score_here + unknown_score_;
        Step& step = best[start + char_length];
        if (score > step.score) step = {vocab_.unk, start, score};
      }
      start += char_length;
    }
    return best;
  }

  const Vocab& vocab_;
  PrecompiledCharsmap charsmap_;
  ByteTrie tokens_;        // normal, user-defined and unused tokens
  ByteTrie user_defined_;  // kept as they are by the normalizer
  float unknown_score_ = 0;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_ugm_model(const Vocab& vocab) {
  return std::make_unique<UgmModel>(vocab);
}

}  // namespace cortiq
