// WordPiece (tokenizer_wpm.cpp) on a small hand-made vocabulary in the
// converted-GGUF form: word-initial pieces carry "▁", continuations are bare.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.hpp"
#include "tokenizer/tokenizer_wpm.hpp"

namespace cortiq {
namespace {

Vocab make_vocab() {
  Vocab v;
  v.kind = TokenizerKind::wpm;
  v.tokens = {"[PAD]", "[UNK]", "[CLS]",  "[SEP]", "▁hello", "▁world", "▁un", "aff",
              "able",  "▁!",    "▁,",     "▁'",    "▁s",     "▁我",    "▁想", "▁cafe",
              "▁a",    "▁$",    "▁apple", "ing",   "▁play",  "▁ab",    "c"};
  v.types.assign(v.tokens.size(), TokenType::normal);
  for (TokenId id : {0, 1, 2, 3}) v.types[id] = TokenType::control;
  for (TokenId id = 0; id < static_cast<TokenId>(v.tokens.size()); ++id) {
    v.token_to_id[v.tokens[id]] = id;
  }
  v.pad = 0, v.unk = 1, v.cls = 2, v.sep = 3;
  return v;
}

std::vector<TokenId> encode(const TokenizerModel& model, std::string_view text) {
  std::vector<TokenId> ids;
  model.encode(text, true, ids);
  return ids;
}

TEST(TokenizerWpm, LowercasesAndSplitsOnWhitespaceAndPunctuation) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(encode(*model, "Hello, World!"), (std::vector<TokenId>{4, 10, 5, 9}));
  EXPECT_EQ(encode(*model, "  hello\t\n world  "), (std::vector<TokenId>{4, 5}));
  EXPECT_EQ(encode(*model, "hello's"), (std::vector<TokenId>{4, 11, 12}));
  // ASCII symbols split like punctuation.
  EXPECT_EQ(encode(*model, "a$a"), (std::vector<TokenId>{16, 17, 16}));
}

TEST(TokenizerWpm, GreedyLongestMatchWithContinuationPieces) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(encode(*model, "unaffable"), (std::vector<TokenId>{6, 7, 8}));
  EXPECT_EQ(encode(*model, "playing"), (std::vector<TokenId>{20, 19}));
  // "▁abc" is not a token: "▁ab" then "c".
  EXPECT_EQ(encode(*model, "abc"), (std::vector<TokenId>{21, 22}));
}

TEST(TokenizerWpm, WordThatCannotBeCoveredIsUnknownAsAWhole) {
  const auto model = make_wpm_model(make_vocab());
  // "▁un" matches but "x" never does: the whole word is [UNK].
  EXPECT_EQ(encode(*model, "unx hello"), (std::vector<TokenId>{1, 4}));
  // A continuation piece alone cannot start a word.
  EXPECT_EQ(encode(*model, "able"), (std::vector<TokenId>{1}));
}

TEST(TokenizerWpm, CjkCharactersAreWordsOfTheirOwn) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(encode(*model, "我想apple"), (std::vector<TokenId>{13, 14, 18}));
}

TEST(TokenizerWpm, StripsAccentsThroughNfd) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(encode(*model, "Café"), (std::vector<TokenId>{15}));        // precomposed é
  EXPECT_EQ(encode(*model, "Cafe\u0301"), (std::vector<TokenId>{15}));  // e + combining acute
  // Controls and format characters vanish; they do not split words.
  EXPECT_EQ(encode(*model, "hel\u200Dlo\x01"), (std::vector<TokenId>{4}));
}

TEST(TokenizerWpm, CasedNormalizerKeepsCaseAndAccents) {
  const auto model = make_wpm_model(make_vocab(), WpmNormalizer{false, false});
  EXPECT_EQ(encode(*model, "Hello hello"), (std::vector<TokenId>{1, 4}));
  EXPECT_EQ(encode(*model, "café"), (std::vector<TokenId>{1}));
}

// Invalid UTF-8: every bad byte decodes as U+FFFD, which the normalizer
// drops like a control character; the rest of the text is unaffected.
TEST(TokenizerWpm, InvalidUtf8IsDropped) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(encode(*model, "hel\xFFlo"), (std::vector<TokenId>{4}));
  EXPECT_EQ(encode(*model, "hello \xE2\x82 world \xC0\xAF"), (std::vector<TokenId>{4, 5}));
  EXPECT_EQ(encode(*model, "\xED\xA0\x80"), (std::vector<TokenId>{}));  // a surrogate
  EXPECT_EQ(encode(*model, std::string("hello\0world", 11)), (std::vector<TokenId>{1}));
}

TEST(TokenizerWpm, EmptyAndBlankTextGiveNoIds) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_TRUE(encode(*model, "").empty());
  EXPECT_TRUE(encode(*model, " \t\r\n\u3000").empty());
}

TEST(TokenizerWpm, TokenBytesGiveBackTheWordSpace) {
  const auto model = make_wpm_model(make_vocab());
  EXPECT_EQ(model->token_bytes(4), " hello");
  EXPECT_EQ(model->token_bytes(7), "aff");
  EXPECT_EQ(model->token_bytes(1), "[UNK]");
  EXPECT_EQ(model->token_bytes(-1), "");
  EXPECT_EQ(model->token_bytes(1000), "");
}

TEST(TokenizerWpm, RandomBytesNeverCrashAndGiveValidIds) {
  const Vocab vocab = make_vocab();
  const auto model = make_wpm_model(vocab);
  test::SplitMix64 rng(0x5EED);
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng.next() % 48, '\0');
    for (char& c : text) {
      // Mostly ASCII letters and spaces, with bytes of any value mixed in.
      const uint64_t r = rng.next();
      c = (r & 3) ? static_cast<char>("helo wrdab,'"[r % 12]) : static_cast<char>(r >> 8);
    }
    for (const TokenId id : encode(*model, text)) {
      ASSERT_GE(id, 0);
      ASSERT_LT(static_cast<size_t>(id), vocab.size());
    }
  }
}

}  // namespace
}  // namespace cortiq
