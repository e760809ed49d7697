// PLaMo-2's tokenizer (tokenizer.ggml.model = "plamo2"): the best path
// through the text by integer scores, as llama.cpp's llm_tokenizer_plamo2
// computes it with its suffix table:
//
//  1. The fragment is read as code points (a byte that does not start a
//     structurally valid UTF-8 sequence reads as U+FFFD, one byte each, as
//     llama.cpp's unicode_cpts_from_utf8); a leading U+FEFF is dropped.
//  2. From the end back to the start, position i takes the path with the
//     lowest cost: each token (byte tokens aside) whose code points start
//     at i costs -round(score * 1e4) plus the best cost after it; the code
//     point alone costs 10^7 (the unknown piece). Longer tokens are tried
//     first and a challenger must cost strictly less, so the longest token
//     wins a tie, and any token beats the unknown piece.
//  3. Forward along the best path: a token's id, or the unknown code
//     point's UTF-8 bytes as <0xXX> byte tokens.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_trie.hpp"
#include "base/error.hpp"
#include "base/strings.hpp"
#include "tokenizer/tokenizer_model.hpp"
#include "tokenizer/utf8_decode.hpp"

namespace cortiq {

namespace {

constexpr int64_t kUnknownScore = 10'000'000;  // llama.cpp's UNKNOWN_SCORE, negated
constexpr int64_t kNotAPiece = std::numeric_limits<int64_t>::min();

// The code points of `text` as llama.cpp reads them: structurally valid
// sequences (overlong forms and surrogates included) decode, any other byte
// is U+FFFD.
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::structural_length(text, pos);
    if (len == 0) {
      out.push_back(utf8::kReplacement);
      ++pos;
      continue;
    }
    static constexpr unsigned char kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    const auto lead = static_cast<unsigned char>(text[pos]);
    char32_t cp = lead & kLeadMask[len];
    for (size_t k = 1; k < len; ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(text[pos + k]) & 0x3F);
    }
    out.push_back(cp);
    pos += len;
  }
  return out;
}

// The UTF-8 bytes of a code point as llama.cpp's unicode_cpt_to_utf8 writes
// them (up to U+1FFFFF, no checks).
void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_of(std::span<const char32_t> cps) {
  std::string out;
  for (const char32_t cp : cps) append_utf8(out, cp);
  return out;
}

class Plamo2Model final : public TokenizerModel {
 public:
  explicit Plamo2Model(const Vocab& vocab)
      : vocab_(vocab),
        byte_tokens_(256, kNoToken),
        scores_(vocab.size(), kNotAPiece),
        pieces_(piece_keys(vocab, scores_, byte_tokens_)) {
    for (int b = 0; b < 256; ++b) {
      if (byte_tokens_[static_cast<size_t>(b)] == kNoToken) {
        throw Error(strfmt("plamo2 tokenizer: the vocabulary has no byte token <0x%02X>", b));
      }
    }
  }

  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    std::vector<char32_t> cps = code_points(text);
    if (!cps.empty() && cps[0] == 0xFEFF) cps.erase(cps.begin());
    const size_t n = cps.size();
    if (n == 0) return;
    struct Step {
      int64_t cost = int64_t{1} << 60;
      size_t length = 0;
      TokenId id = kNoToken;  // kNoToken: the code point's bytes
    };
    std::vector<Step> best(n + 1);
    best[n].cost = 0;
    std::vector<std::pair<size_t, TokenId>> matches;  // (code points, token) starting at i
    std::string bytes;
    for (size_t i = n; i-- > 0;) {
      // The tokens whose code points start at i, along the trie.
      matches.clear();
      uint32_t node = ByteTrie::kRoot;
      for (size_t len = 1; i + len <= n && node != ByteTrie::kNone; ++len) {
        bytes.clear();
        append_utf8(bytes, cps[i + len - 1]);
        for (size_t b = 0; b < bytes.size() && node != ByteTrie::kNone; ++b) {
          node = pieces_.child(node, static_cast<uint8_t>(bytes[b]));
        }
        if (node == ByteTrie::kNone) break;
        const TokenId id = pieces_.value(node);
        if (id != kNoToken && scores_[static_cast<size_t>(id)] != kNotAPiece) {
          matches.emplace_back(len, id);
        }
      }
      Step& here = best[i];
      for (auto m = matches.rbegin(); m != matches.rend(); ++m) {  // longest first
        const int64_t cost = best[i + m->first].cost - scores_[static_cast<size_t>(m->second)];
        if (cost < here.cost) here = {cost, m->first, m->second};
      }
      const int64_t unknown = best[i + 1].cost + kUnknownScore;
      if (unknown < here.cost) here = {unknown, 1, kNoToken};
    }
    for (size_t pos = 0; pos < n; pos += best[pos].length) {
      if (best[pos].id != kNoToken) {
        out.push_back(best[pos].id);
        continue;
      }
      bytes.clear();
      append_utf8(bytes, cps[pos]);
      for (const char b : bytes) out.push_back(byte_tokens_[static_cast<unsigned char>(b)]);
    }
  }

  std::string token_bytes(TokenId id) const override {
    const std::string_view text = vocab_.token_text(id);
    if (vocab_.type(id) == TokenType::byte) {
      if (const auto byte = byte_of(text)) return std::string(1, static_cast<char>(*byte));
    }
    return std::string(text);
  }

 private:
  // The byte of a "<0xXX>" token.
  static std::optional<uint8_t> byte_of(std::string_view text) {
    if (text.size() != 6 || !starts_with(text, "<0x") || text[5] != '>') return std::nullopt;
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(text[3]), lo = hex(text[4]);
    if (hi < 0 || lo < 0) return std::nullopt;
    return static_cast<uint8_t>(hi * 16 + lo);
  }

  // Every token but the byte tokens, keyed by its code points' bytes (a
  // later id with the same text wins, as llama.cpp's table); each one's
  // round(score * 1e4), kNotAPiece for a non-finite score; and the byte
  // tokens by byte.
  static ByteTrie piece_keys(const Vocab& vocab, std::vector<int64_t>& scores,
                             std::vector<TokenId>& byte_tokens) {
    std::vector<std::string> texts(vocab.size());
    std::vector<std::pair<std::string_view, TokenId>> keys;
    for (size_t i = 0; i < vocab.size(); ++i) {
      const auto id = static_cast<TokenId>(i);
      if (vocab.type(id) == TokenType::byte) {
        if (const auto byte = byte_of(vocab.tokens[i])) byte_tokens[*byte] = id;
        continue;
      }
      const float score = i < vocab.scores.size() ? vocab.scores[i] : 0.0f;
      if (std::isfinite(score)) {
        scores[i] = static_cast<int32_t>(std::round(static_cast<double>(score) * 1e4));
      }
      texts[i] = utf8_of(code_points(vocab.tokens[i]));
      keys.emplace_back(texts[i], id);
    }
    return ByteTrie(std::move(keys));
  }

  const Vocab& vocab_;
  std::vector<TokenId> byte_tokens_;
  std::vector<int64_t> scores_;  // by id
  ByteTrie pieces_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_plamo2_model(const Vocab& vocab) {
  return std::make_unique<Plamo2Model>(vocab);
}

}  // namespace cortiq
