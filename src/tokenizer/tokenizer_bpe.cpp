// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the text is cut into words
// by the pre-tokenizer, each word's bytes become characters of the GPT-2
// byte alphabet, and adjacent symbols merge by rank until no ranked pair is
// left, as the peer's llm_tokenizer_bpe does.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/byte_unicode.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer_model.hpp"

namespace cortiq {
namespace {

// Symbols are token ids, plus ids past the vocabulary for strings that the
// merges produce but the vocabulary lacks (they can merge on, but a symbol
// left holding one falls back to single-byte tokens, as in the peer).
using SymbolId = int32_t;
constexpr SymbolId kNoSymbol = -1;

struct Merge {
  int32_t rank;
  SymbolId result;
};

uint64_t pair_key(SymbolId left, SymbolId right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// One symbol of a word being merged: the byte range it covers and its
// neighbours in the (doubly linked) list of live symbols.
struct Symbol {
  SymbolId id;
  uint32_t begin, end;
  int32_t prev, next;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // index of the left symbol
  SymbolId left_id, right_id;
  // Lowest rank first, then leftmost: the order the peer merges in.
  bool operator<(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

// String -> id with open addressing over one arena: the constructor does a
// million look-ups on a 150k-entry vocabulary, and a node-based map spends
// most of that time in cache misses.
class StringIds {
 public:
  void reserve(size_t n) {
    entries_.reserve(n);
    rehash(std::bit_ceil(n * 2 + 16));
  }

  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(s);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const int32_t e = slots_[i];
      if (e < 0) return -1;
      if (entries_[e].hash == h && view(entries_[e]) == s) return entries_[e].id;
    }
  }

  // Inserts `s` with `id` unless present; returns the id it holds. With
  // `overwrite`, a present `s` takes `id`.
  int32_t insert(std::string_view s, int32_t id, bool overwrite = false) {
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(64, slots_.size() * 2));
    const uint64_t h = hash(s);
    size_t i = h & mask_;
    for (; slots_[i] >= 0; i = (i + 1) & mask_) {
      Entry& e = entries_[slots_[i]];
      if (e.hash == h && view(e) == s) {
        if (overwrite) e.id = id;
        return e.id;
      }
    }
    slots_[i] = static_cast<int32_t>(entries_.size());
    entries_.push_back({h, arena_.size(), static_cast<uint32_t>(s.size()), id});
    arena_.append(s);
    return id;
  }

 private:
  struct Entry {
    uint64_t hash;
    size_t offset;
    uint32_t size;
    int32_t id;
  };

  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  std::string_view view(const Entry& e) const { return {arena_.data() + e.offset, e.size}; }

  void rehash(size_t n_slots) {
    slots_.assign(n_slots, -1);
    mask_ = n_slots - 1;
    for (size_t k = 0; k < entries_.size(); ++k) {
      size_t i = entries_[k].hash & mask_;
      while (slots_[i] >= 0) i = (i + 1) & mask_;
      slots_[i] = static_cast<int32_t>(k);
    }
  }

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<int32_t> slots_;
  size_t mask_ = 0;
};

class BpeModel final : public TokenizerModel {
 public:
  explicit BpeModel(const Vocab& vocab) : pre_(vocab.pre) {
    n_vocab_ = static_cast<int32_t>(vocab.size());
    build_symbols(vocab);
    build_merges(vocab);
    token_text_ = vocab.tokens;
    types_ = vocab.types;
  }

  void encode(std::string_view text, bool /*at_start*/, std::vector<TokenId>& out) const override {
    // Invalid UTF-8 never reaches PCRE2: each bad byte becomes U+FFFD first,
    // which is what the peer's decoder does too.
    std::string sanitized;
    if (!is_valid_utf8(text)) {
      sanitized = sanitize_utf8(text);
      text = sanitized;
    }
    std::vector<std::string_view> words;
    pre_.split(text, words);
    for (auto word : words) encode_word(word, out);
  }

  std::string token_bytes(TokenId id) const override {
    if (id < 0 || id >= n_vocab_) return {};
    const std::string& text = token_text_[static_cast<size_t>(id)];
    if (static_cast<size_t>(id) < types_.size() &&
        types_[static_cast<size_t>(id)] == TokenType::byte)
      if (auto b = parse_byte_token(text)) return std::string(1, static_cast<char>(*b));
    // Added tokens are often stored as plain text, outside the byte
    // alphabet: those stand for their own UTF-8 (as in HF's decoder).
    if (auto bytes = byte_decode(text)) return *bytes;
    return text;
  }

 private:
  static std::optional<uint8_t> parse_byte_token(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (hi < 0 || lo < 0) return std::nullopt;
    return static_cast<uint8_t>(hi * 16 + lo);
  }

  SymbolId intern(std::string_view s) {
    const SymbolId id = symbol_of_.insert(s, static_cast<SymbolId>(n_symbols_));
    if (id == static_cast<SymbolId>(n_symbols_)) ++n_symbols_;
    return id;
  }

  void build_symbols(const Vocab& vocab) {
    symbol_of_.reserve(vocab.size() + vocab.merges.size() / 8);
    // When two tokens share a text the later id wins, as in the peer.
    for (size_t i = 0; i < vocab.tokens.size(); ++i)
      symbol_of_.insert(vocab.tokens[i], static_cast<SymbolId>(i), /*overwrite=*/true);
    n_symbols_ = vocab.tokens.size();
    for (int b = 0; b < 256; ++b) {
      const std::string ch(byte_to_utf8(static_cast<uint8_t>(b)));
      byte_symbol_[b] = find_symbol(ch);
      single_byte_token_[b] = find_token(std::string(1, static_cast<char>(b)));
    }
  }

  void build_merges(const Vocab& vocab) {
    merges_.reserve(vocab.merges.size());
    std::string joined;
    for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const auto& [left, right] = vocab.merges[rank];
      const SymbolId l = intern(left), r = intern(right);
      joined.assign(left).append(right);
      const SymbolId result = intern(joined);
      // A repeated pair keeps its first (best) rank.
      merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});
    }
    // Byte symbols that only the merges know.
    for (int b = 0; b < 256; ++b)
      if (byte_symbol_[b] == kNoSymbol) byte_symbol_[b] = find_symbol(std::string(byte_to_utf8(b)));
  }

  SymbolId find_symbol(std::string_view s) const { return symbol_of_.find(s); }

  TokenId find_token(std::string_view s) const {
    const SymbolId id = find_symbol(s);
    return id >= 0 && id < n_vocab_ ? id : kNoToken;
  }

  const Merge* find_merge(SymbolId left, SymbolId right) const {
    if (left == kNoSymbol || right == kNoSymbol) return nullptr;
    auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  void encode_word(std::string_view word, std::vector<TokenId>& out) const {
    if (word.size() <= kMaxCachedWord) {
      std::lock_guard lock(cache_mutex_);
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<TokenId> ids;
    tokenize_word(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() <= kMaxCachedWord) {
      std::lock_guard lock(cache_mutex_);
      if (cache_.size() >= kMaxCacheEntries) cache_.clear();
      cache_.emplace(std::string(word), std::move(ids));
    }
  }

  void tokenize_word(std::string_view word, std::vector<TokenId>& out) const {
    if (pre_.ignore_merges()) {
      // llama3-style: a word that is a token is used as it is.
      if (TokenId id = find_token(byte_encode(word)); id != kNoToken) {
        out.push_back(id);
        return;
      }
    }
    std::vector<Symbol> symbols(word.size());
    for (size_t i = 0; i < word.size(); ++i) {
      const auto b = static_cast<uint8_t>(word[i]);
      symbols[i] = {byte_symbol_[b], static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1),
                    static_cast<int32_t>(i) - 1,
                    i + 1 < word.size() ? static_cast<int32_t>(i + 1) : -1};
    }
    merge_symbols(symbols);
    for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next)
      emit_symbol(word, symbols[i], out);
  }

  // Repeatedly merges the lowest-ranked adjacent pair (leftmost on ties).
  void merge_symbols(std::vector<Symbol>& symbols) const {
    std::priority_queue<Candidate> queue;
    auto push = [&](int32_t left) {
      if (left < 0) return;
      const int32_t right = symbols[left].next;
      if (right < 0) return;
      if (const Merge* m = find_merge(symbols[left].id, symbols[right].id))
        queue.push({m->rank, left, symbols[left].id, symbols[right].id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& left = symbols[c.left];
      // Stale when either side has merged since the candidate was queued.
      if (left.end == left.begin || left.next < 0 || left.id != c.left_id) continue;
      Symbol& right = symbols[left.next];
      if (right.id != c.right_id) continue;
      left.id = find_merge(left.id, right.id)->result;
      left.end = right.end;
      left.next = right.next;
      right.begin = right.end;  // dead
      if (left.next >= 0) symbols[left.next].prev = c.left;
      push(left.prev);
      push(c.left);
    }
  }

  void emit_symbol(std::string_view word, const Symbol& s, std::vector<TokenId>& out) const {
    if (s.id >= 0 && s.id < n_vocab_) {
      out.push_back(s.id);
      return;
    }
    // Not a token: the peer looks up each byte of the symbol's byte-level
    // text as a one-byte token and drops what is not one.
    const std::string text = byte_encode(word.substr(s.begin, s.end - s.begin));
    for (char c : text) {
      const TokenId id = single_byte_token_[static_cast<uint8_t>(c)];
      if (id != kNoToken) out.push_back(id);
    }
  }

  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = 1 << 17;

  PreTokenizer pre_;
  int32_t n_vocab_ = 0;
  size_t n_symbols_ = 0;
  StringIds symbol_of_;
  std::unordered_map<uint64_t, Merge> merges_;
  SymbolId byte_symbol_[256];
  TokenId single_byte_token_[256];
  std::vector<std::string> token_text_;
  std::vector<TokenType> types_;

  // Words repeat: their ids are remembered (bounded; shared by threads).
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>, StringHash, std::equal_to<>> cache_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_bpe_model(const Vocab& vocab) {
  return std::make_unique<BpeModel>(vocab);
}

}  // namespace cortiq
