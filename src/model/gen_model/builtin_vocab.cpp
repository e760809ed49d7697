#include "model/gen_model/builtin_vocab.hpp"

#include <set>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq {

namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's visible space.
constexpr std::string_view kSpace = "\xE2\x96\x81";

constexpr std::string_view kWords[] = {
    "hi",   "hello", "the",  "and",    "to",   "of",    "is",    "in",     "it",   "you",   "that",
    "was",  "he",    "she",  "for",    "on",   "are",   "with",  "as",     "they", "be",    "at",
    "one",  "have",  "this", "from",   "or",   "had",   "by",    "not",    "but",  "what",  "all",
    "were", "we",    "when", "your",   "can",  "said",  "there", "an",     "each", "which", "do",
    "how",  "their", "if",   "will",   "up",   "other", "about", "out",    "many", "then",  "them",
    "so",   "some",  "her",  "would",  "make", "like",  "him",   "into",   "time", "has",   "look",
    "two",  "more",  "go",   "see",    "no",   "way",   "could", "my",     "than", "first", "day",
    "did",  "get",   "come", "made",   "once", "upon",  "story", "little", "girl", "boy",   "cat",
    "dog",  "happy", "play", "friend", "sun",  "big",   "good",  "very",   "name", "world", "yes",
};

class VocabBuilder {
 public:
  void add(std::string piece, TokenType type, float score = 0.0f) {
    if (!seen_.insert(piece).second) return;  // each piece once
    vocab_.tokens.push_back(std::move(piece));
    vocab_.types.push_back(type);
    vocab_.scores.push_back(score);
  }
  // Normal pieces get falling scores in the order added, so earlier (shorter)
  // pieces are preferred when two merges compete.
  void add_piece(std::string piece) {
    add(std::move(piece), TokenType::normal, -0.01f * static_cast<float>(n_pieces_++));
  }
  Vocabulary take() { return std::move(vocab_); }
  size_t size() const { return vocab_.tokens.size(); }

 private:
  Vocabulary vocab_;
  std::set<std::string> seen_;
  int n_pieces_ = 0;
};

Vocabulary make_builtin() {
  VocabBuilder b;
  b.add("<unk>", TokenType::unknown);
  b.add("<s>", TokenType::control);
  b.add("</s>", TokenType::control);
  for (int byte = 0; byte < 256; ++byte) b.add(strfmt("<0x%02X>", byte), TokenType::byte);
  b.add_piece(std::string(kSpace));
  for (char c = '!'; c <= '~'; ++c) b.add_piece(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) b.add_piece(std::string(kSpace) + c);
  for (char c = 'A'; c <= 'Z'; ++c) b.add_piece(std::string(kSpace) + c);
  for (char c = '0'; c <= '9'; ++c) b.add_piece(std::string(kSpace) + c);
  for (std::string_view word : kWords) {
    for (size_t n = 2; n <= word.size(); ++n)
      b.add_piece(std::string(kSpace) + std::string(word.substr(0, n)));
  }
  return b.take();
}

template <class T>
gguf::Value array_value(gguf::ValueType element_type, std::vector<T> items) {
  gguf::Array array = gguf::Array::of(element_type);
  array.items = std::move(items);
  return gguf::Value(std::move(array));
}

}  // namespace

size_t builtin_vocab_size() {
  static const size_t size = make_builtin().tokens.size();
  return size;
}

Vocabulary builtin_spm_vocab(int64_t n_vocab) {
  Vocabulary vocab = make_builtin();
  const auto natural = static_cast<int64_t>(vocab.tokens.size());
  if (n_vocab == 0) return vocab;
  if (n_vocab < natural) {
    throw Error(
        strfmt("the built-in vocabulary has %lld tokens; a vocabulary of %lld is too small "
               "(use --vocab-from FILE.gguf for another tokenizer)",
               static_cast<long long>(natural), static_cast<long long>(n_vocab)));
  }
  for (int64_t i = natural; i < n_vocab; ++i) {
    vocab.tokens.push_back(strfmt("<unused_%lld>", static_cast<long long>(i - natural)));
    vocab.types.push_back(TokenType::unused);
    vocab.scores.push_back(0.0f);
  }
  return vocab;
}

std::vector<gguf::KeyValue> tokenizer_metadata(const Vocabulary& vocab) {
  std::vector<int32_t> types;
  types.reserve(vocab.types.size());
  for (const TokenType t : vocab.types) types.push_back(static_cast<int32_t>(t));
  std::vector<gguf::KeyValue> kv;
  kv.push_back({"tokenizer.ggml.model", gguf::Value(std::string("llama"))});
  kv.push_back({"tokenizer.ggml.tokens", array_value(gguf::ValueType::string, vocab.tokens)});
  kv.push_back({"tokenizer.ggml.scores", array_value(gguf::ValueType::f32, vocab.scores)});
  kv.push_back({"tokenizer.ggml.token_type", array_value(gguf::ValueType::i32, std::move(types))});
  kv.push_back({"tokenizer.ggml.bos_token_id", gguf::Value(vocab.bos_id)});
  kv.push_back({"tokenizer.ggml.eos_token_id", gguf::Value(vocab.eos_id)});
  kv.push_back({"tokenizer.ggml.unknown_token_id", gguf::Value(vocab.unk_id)});
  kv.push_back({"tokenizer.ggml.add_bos_token", gguf::Value(true)});
  kv.push_back({"tokenizer.ggml.add_eos_token", gguf::Value(false)});
  return kv;
}

}  // namespace cortiq
