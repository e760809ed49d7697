// Gemma 4 (tokenizer.ggml.model = "gemma4"), matching the peer: a
// SentencePiece-style BPE over raw UTF-8 rather than GPT-2's byte alphabet.
//
//  1. Spaces become "▁" (U+2581); no dummy prefix is added.
//  2. The text is cut into runs of '\n' and runs of everything else; a run
//     of newlines that is itself a token is taken whole (the vocabulary has
//     "\n" x 1..31), as the peer does since its fix for Gemma 4.
//  3. Each run starts as one symbol per code point; the adjacent pair with
//     the lowest merge rank is merged (leftmost first among equal ranks)
//     until no pair has a merge.
//  4. A symbol that is not a token falls back to its bytes as <0xXX>
//     tokens; a byte without one is dropped.
//
// Invalid UTF-8: each bad byte becomes U+FFFD before step 1 (utf8_decode.hpp),
// as the peer's code point split does; U+FFFD then tokenizes like any other
// character. The peer throws on 4-byte forms above U+10FFFF; here they are
// bad bytes like any other.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_model.hpp"
#include "tokenizer/utf8_decode.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

// Spaces -> "▁", invalid bytes -> U+FFFD; everything else unchanged.
std::string normalize(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Decoded d = utf8::decode(text, pos);
    if (!d.valid) {
      out.append(utf8::kReplacementUtf8);
    } else if (d.cp == U' ') {
      out.append(kSpaceMark);
    } else {
      out.append(text.substr(pos, d.len));
    }
    pos += d.len;
  }
  return out;
}

// Length of the UTF-8 sequence that starts with `lead` (text is valid here).
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0x41>" -> 0x41, or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') return -1;
  const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Strings and their ids: open addressing with linear probing, because
// Gemma 4 has 262k tokens and 515k merges whose sides are looked up while
// loading; node-based maps spend seconds on that. Ids are positions in
// texts(); a text added twice maps to its later id (the peer's rule for
// duplicate tokens).
class StringIndex {
 public:
  explicit StringIndex(size_t expected) : slots_(capacity_for(expected)) {
    texts_.reserve(expected);
  }

  int32_t add(std::string text) {
    const auto id = static_cast<int32_t>(texts_.size());
    texts_.push_back(std::move(text));
    if (2 * texts_.size() > slots_.size()) rehash(2 * slots_.size());
    place(id);
    return id;
  }

  int32_t find(std::string_view text) const {
    const size_t mask = slots_.size() - 1;
    const uint64_t h = hash(text);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return kNoToken;
      if (slot.tag == tag_of(h) && texts_[slot.id] == text) return slot.id;
    }
  }

  size_t size() const { return texts_.size(); }
  const std::string& text(int32_t id) const { return texts_[id]; }

 private:
  struct Slot {
    uint32_t tag = 0;  // high hash bits, to skip most string compares
    int32_t id = kNoToken;
  };

  static uint64_t hash(std::string_view text) { return std::hash<std::string_view>{}(text); }
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32); }
  static size_t capacity_for(size_t n) { return std::bit_ceil(std::max<size_t>(16, 2 * n)); }

  void place(int32_t id) {
    const size_t mask = slots_.size() - 1;
    const uint64_t h = hash(texts_[id]);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id < 0 || (slot.tag == tag_of(h) && texts_[slot.id] == texts_[id])) {
        slot = {tag_of(h), id};
        return;
      }
    }
  }

  void rehash(size_t capacity) {
    slots_.assign(capacity, Slot{});
    // Later ids first, so that a duplicate text keeps its later id.
    for (auto id = static_cast<int32_t>(texts_.size()) - 1; id >= 0; --id) {
      if (find(texts_[id]) == kNoToken) place(id);
    }
  }

  std::vector<std::string> texts_;
  std::vector<Slot> slots_;  // power-of-two size, at most half full
};

// Merge ranks by the ids of both sides, open addressing as above.
class MergeRanks {
 public:
  explicit MergeRanks(size_t n) : slots_(std::bit_ceil(std::max<size_t>(16, 2 * n))) {}

  // The first rank given for a pair wins, as in the peer.
  void add(int32_t left, int32_t right, int32_t rank) {
    Slot& slot = slots_[slot_of(key(left, right))];
    if (slot.key == kEmpty) slot = {key(left, right), rank};
  }

  // The pair's rank, or -1.
  int32_t find(int32_t left, int32_t right) const {
    const Slot& slot = slots_[slot_of(key(left, right))];
    return slot.key == kEmpty ? -1 : slot.rank;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are never negative here
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = -1;
  };

  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // The slot holding `k`, or the empty one where it would go.
  size_t slot_of(uint64_t k) const {
    const size_t mask = slots_.size() - 1;
    size_t i = ((k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    while (slots_[i].key != k && slots_[i].key != kEmpty) i = (i + 1) & mask;
    return i;
  }

  std::vector<Slot> slots_;  // sized once: at most half full
};

class Gemma4Model final : public TokenizerModel {
 public:
  explicit Gemma4Model(const Vocab& vocab)
      : n_tokens_(vocab.tokens.size()),
        types_(vocab.types),
        symbols_(vocab.tokens.size() + 64),
        ranks_(vocab.merges.size()) {
    types_.resize(n_tokens_, TokenType::normal);
    for (const std::string& token : vocab.tokens) symbols_.add(token);
    // Byte fallback looks the pieces up by text, whatever their type.
    for (int b = 0; b < 256; ++b) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const std::string piece = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      byte_ids_[b] = symbols_.find(piece);
    }
    for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const auto& [left, right] = vocab.merges[rank];
      if (left.empty() || right.empty()) continue;  // unsplittable entry: never matches
      ranks_.add(symbol_id(left), symbol_id(right), static_cast<int32_t>(rank));
    }
  }

  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    const std::string normalized = normalize(text);
    std::string_view rest = normalized;
    while (!rest.empty()) {
      const bool newlines = rest.front() == '\n';
      const size_t end = newlines ? rest.find_first_not_of('\n') : rest.find('\n');
      const std::string_view run = rest.substr(0, end);
      rest.remove_prefix(run.size());
      if (const int32_t id = symbols_.find(run); newlines && is_token(id)) {
        out.push_back(id);
      } else {
        encode_run(run, out);
      }
    }
  }

  // "▁" gives back its space, <0xXX> its byte; control and user-defined
  // tokens give their text (the Tokenizer decides whether to show them).
  std::string token_bytes(TokenId id) const override {
    if (!is_token(id)) return {};
    const std::string& text = symbols_.text(id);
    switch (types_[id]) {
      case TokenType::normal:
        return unescape_spaces(text);
      case TokenType::byte: {
        const int b = parse_byte_token(text);
        return b < 0 ? std::string{} : std::string(1, static_cast<char>(b));
      }
      case TokenType::control:
      case TokenType::user_defined:
      case TokenType::unknown:
        return text;
      case TokenType::unused:
      case TokenType::undefined:
        break;
    }
    return {};
  }

 private:
  struct Symbol {
    size_t start = 0, len = 0;  // bytes of the run; len 0 once merged away
    int prev = -1, next = -1;
    int32_t id = kNoToken;  // symbol_id of its text
  };

  struct Bigram {
    int32_t rank;
    int left, right;
    int32_t left_id, right_id;  // ids when queued, to spot stale entries
    // Lowest rank first, then leftmost (std::priority_queue pops the max).
    bool operator<(const Bigram& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };

  static std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t at; (at = text.find(kSpaceMark)) != std::string_view::npos;) {
      out.append(text.substr(0, at)).push_back(' ');
      text.remove_prefix(at + kSpaceMark.size());
    }
    out.append(text);
    return out;
  }

  bool is_token(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < n_tokens_; }

  // Id of a merge side; one that is no token gets an id past the tokens.
  int32_t symbol_id(std::string_view text) {
    const int32_t id = symbols_.find(text);
    return id != kNoToken ? id : symbols_.add(std::string(text));
  }

  void encode_run(std::string_view run, std::vector<TokenId>& out) const {
    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < run.size();) {
      const size_t len =
          std::min(sequence_length(static_cast<unsigned char>(run[pos])), run.size() - pos);
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({pos, len, index - 1, -1, symbols_.find(run.substr(pos, len))});
      if (index > 0) symbols[index - 1].next = index;
      pos += len;
    }
    merge(run, symbols);
    for (const Symbol& s : symbols) {
      if (s.len > 0) emit(run.substr(s.start, s.len), s.id, out);
    }
  }

  void merge(std::string_view run, std::vector<Symbol>& symbols) const {
    std::priority_queue<Bigram> queue;
    const auto push = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const int32_t a = symbols[left].id, b = symbols[right].id;
      if (a == kNoToken || b == kNoToken) return;
      if (const int32_t rank = ranks_.find(a, b); rank >= 0) queue.push({rank, left, right, a, b});
    };
    for (size_t i = 1; i < symbols.size(); ++i) push(static_cast<int>(i) - 1, static_cast<int>(i));
    while (!queue.empty()) {
      const Bigram top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.left];
      Symbol& right = symbols[top.right];
      if (left.len == 0 || right.len == 0 || left.next != top.right || left.id != top.left_id ||
          right.id != top.right_id) {
        continue;  // one side changed since this pair was queued
      }
      left.len += right.len;
      left.id = symbols_.find(run.substr(left.start, left.len));
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      push(left.prev, top.left);
      push(top.left, left.next);
    }
  }

  void emit(std::string_view text, int32_t id, std::vector<TokenId>& out) const {
    if (is_token(id)) {
      out.push_back(id);
      return;
    }
    for (const char c : text) {
      const TokenId b = byte_ids_[static_cast<unsigned char>(c)];
      if (b != kNoToken) out.push_back(b);
    }
  }

  size_t n_tokens_;
  std::vector<TokenType> types_;
  StringIndex symbols_;  // the tokens (ids as in the vocabulary), then other merge sides
  MergeRanks ranks_;
  std::array<TokenId, 256> byte_ids_{};
};

}  // namespace

std::unique_ptr<TokenizerModel> make_gemma4_model(const Vocab& vocab) {
  return std::make_unique<Gemma4Model>(vocab);
}

}  // namespace cortiq
