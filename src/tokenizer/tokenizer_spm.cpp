// SentencePiece BPE (tokenizer.ggml.model = "llama"): Llama 2, Mistral v0.1,
// Phi-3, TinyLlama. Spaces become "▁", the text starts as one symbol per
// UTF-8 character, and the adjacent pair whose concatenation is the
// highest-scoring token merges first, until no pair is a token. A symbol that
// is no token is split back along the merges that built it, and what still
// is no token falls back to byte tokens <0xXX>.
//
// Invalid UTF-8 never stops it: a symbol spans as many bytes as its first
// byte announces (a stray continuation byte is a one-byte symbol, a lead
// byte cut off by the end of the text is shorter), and such symbols are no
// token, so they come out as their bytes' <0xXX> tokens.
#include <cstdio>
#include <queue>
#include <unordered_map>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"
#include "tokenizer/tokenizer_model.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kSpaceMark = "\xe2\x96\x81";  // U+2581 "▁"

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos)).append(to);
  }
  out.append(s.substr(pos));
  return out;
}

// One symbol of the text being merged: a byte range, linked to its live
// neighbours. A symbol merged into its left neighbour has n == 0.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t n;
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

// Highest score first; among equal scores, the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmModel final : public TokenizerModel {
 public:
  explicit SpmModel(const Vocab& vocab) : vocab_(vocab) { build_byte_tokens(); }

  void encode(std::string_view text, bool at_start, std::vector<TokenId>& out) const override {
    std::string escaped = (vocab_.add_space_prefix && at_start) ? " " : "";
    escaped.append(text);
    Session(*this, replace_all(escaped, " ", kSpaceMark)).run(out);
  }

  std::string token_bytes(TokenId id) const override {
    if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) return {};
    const std::string& text = vocab_.tokens[id];
    if (vocab_.type(id) == TokenType::byte) {
      if (auto byte = parse_byte_token(text)) return std::string(1, static_cast<char>(*byte));
      return text;
    }
    return replace_all(text, kSpaceMark, " ");
  }

 private:
  // The state of one encode call.
  class Session {
   public:
    Session(const SpmModel& model, std::string text) : model_(model), text_(std::move(text)) {}

    void run(std::vector<TokenId>& out) {
      split_characters();
      for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) try_add_bigram(i - 1, i);
      merge();
      if (symbols_.empty()) return;
      for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
    }

   private:
    void split_characters() {
      symbols_.reserve(text_.size());
      for (size_t offset = 0; offset < text_.size();) {
        const size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(text_[offset])),
                                  text_.size() - offset);
        const int index = static_cast<int>(symbols_.size());
        symbols_.push_back({index - 1, offset + n == text_.size() ? -1 : index + 1, offset, n});
        offset += n;
      }
    }

    void merge() {
      while (!queue_.empty()) {
        const Bigram bigram = queue_.top();
        queue_.pop();
        Symbol& left = symbols_[bigram.left];
        Symbol& right = symbols_[bigram.right];
        // Stale: one side was merged since this pair was queued.
        if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols_[right.next].prev = bigram.left;
        try_add_bigram(left.prev, bigram.left);
        try_add_bigram(bigram.left, left.next);
      }
    }

    void try_add_bigram(int left, int right) {
      if (left == -1 || right == -1) return;
      std::string piece = text_.substr(symbols_[left].offset, symbols_[left].n + symbols_[right].n);
      const std::optional<TokenId> id = model_.vocab_.find(piece);
      if (!id) return;
      const float score = model_.vocab_.scores.empty() ? 0.0f : model_.vocab_.scores[*id];
      queue_.push({left, right, score, piece.size()});
      // The last pair that formed this text is the one split back if needed.
      rev_merge_[std::move(piece)] = {left, right};
    }

    void resegment(const Symbol& symbol, std::vector<TokenId>& out) const {
      const std::string piece = text_.substr(symbol.offset, symbol.n);
      if (const std::optional<TokenId> id = model_.vocab_.find(piece)) {
        out.push_back(*id);
        return;
      }
      const auto it = rev_merge_.find(piece);
      if (it == rev_merge_.end()) {
        for (const char c : piece) out.push_back(model_.byte_token(static_cast<unsigned char>(c)));
        return;
      }
      resegment(symbols_[it->second.first], out);
      resegment(symbols_[it->second.second], out);
    }

    const SpmModel& model_;
    const std::string text_;
    std::vector<Symbol> symbols_;
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
    std::unordered_map<std::string, std::pair<int, int>> rev_merge_;
  };

  static std::optional<uint8_t> parse_byte_token(std::string_view text) {
    if (text.size() != 6 || !starts_with(text, "<0x") || text[5] != '>') return std::nullopt;
    int64_t value = 0;
    for (const char c : text.substr(3, 2)) {
      const int digit = (c >= '0' && c <= '9')   ? c - '0'
                        : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                        : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                 : -1;
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    return static_cast<uint8_t>(value);
  }

  // <0xXX> when the vocabulary has it, else the byte as a one-byte token
  // (as the peer falls back), else <unk>; kNoToken when none exists.
  void build_byte_tokens() {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      std::optional<TokenId> id = vocab_.find(hex);
      if (!id) id = vocab_.find(std::string(1, static_cast<char>(b)));
      byte_tokens_[b] = id ? *id : vocab_.unk;
    }
  }

  TokenId byte_token(unsigned char byte) const {
    const TokenId id = byte_tokens_[byte];
    if (id == kNoToken) {
      throw Error(
          strfmt("tokenizer: byte 0x%02X has no token (no <0x%02X>, no <unk>)", byte, byte));
    }
    return id;
  }

  const Vocab& vocab_;
  TokenId byte_tokens_[256];
};

}  // namespace

std::unique_ptr<TokenizerModel> make_spm_model(const Vocab& vocab) {
  return std::make_unique<SpmModel>(vocab);
}

}  // namespace cortiq
