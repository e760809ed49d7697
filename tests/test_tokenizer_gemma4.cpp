// Gemma 4's BPE (tokenizer_gemma4.cpp) on a small hand-made vocabulary:
// "▁" for spaces, ranked merges over code points, <0xXX> byte fallback.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "tokenizer/tokenizer_model.hpp"

namespace cortiq {
namespace {

class TokenizerGemma4 : public ::testing::Test {
 protected:
  TokenizerGemma4() {
    add("<pad>", TokenType::control);
    add("<eos>", TokenType::control);
    add("<bos>", TokenType::control);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, TokenType::byte);
    }
    for (const char* t :
         {"▁",  "h",    "e", "l", "o", "he",  "ll", "hell", "hello", "▁hello",
          "\n", "\n\n", "x", "y", "z", "xyz", "ab", "a",    "b",     "\xEF\xBF\xBD"}) {
      add(t, TokenType::normal);
    }
    // Rank order: earlier merges win. "x y" builds a side that is not a
    // token; "l l" shows leftmost-first among equal ranks.
    vocab_.merges = {{"h", "e"},     {"l", "l"}, {"he", "ll"}, {"hell", "o"},
                     {"▁", "hello"}, {"x", "y"}, {"xy", "z"},  {"a", "b"}};
    vocab_.kind = TokenizerKind::gemma4;
    model_ = make_gemma4_model(vocab_);
  }

  void add(std::string text, TokenType type) {
    const auto id = static_cast<TokenId>(vocab_.tokens.size());
    vocab_.token_to_id[text] = id;
    vocab_.tokens.push_back(std::move(text));
    vocab_.types.push_back(type);
  }

  TokenId id(const std::string& text) const { return vocab_.token_to_id.at(text); }
  TokenId byte(int b) const { return 3 + b; }

  std::vector<TokenId> encode(std::string_view text) const {
    std::vector<TokenId> ids;
    model_->encode(text, true, ids);
    return ids;
  }

  Vocab vocab_;
  std::unique_ptr<TokenizerModel> model_;
};

TEST_F(TokenizerGemma4, MergesByRankWithSpacesAsMarks) {
  EXPECT_EQ(encode("hello"), (std::vector<TokenId>{id("hello")}));
  EXPECT_EQ(encode(" hello"), (std::vector<TokenId>{id("▁hello")}));
  // No dummy prefix; a space that merges with nothing stays "▁".
  EXPECT_EQ(encode("hello  hello"), (std::vector<TokenId>{id("hello"), id("▁"), id("▁hello")}));
  EXPECT_EQ(encode("hel"), (std::vector<TokenId>{id("he"), id("l")}));
}

TEST_F(TokenizerGemma4, EqualRanksMergeLeftmostFirst) {
  EXPECT_EQ(encode("lll"), (std::vector<TokenId>{id("ll"), id("l")}));
  EXPECT_EQ(encode("llll"), (std::vector<TokenId>{id("ll"), id("ll")}));
}

TEST_F(TokenizerGemma4, MergeSidesNeedNotBeTokens) {
  EXPECT_EQ(encode("xyz"), (std::vector<TokenId>{id("xyz")}));
  // "xy" is only a merge side: its bytes fall back.
  EXPECT_EQ(encode("xy"), (std::vector<TokenId>{byte('x'), byte('y')}));
}

TEST_F(TokenizerGemma4, NewlineRunsAreSeparateWords) {
  EXPECT_EQ(encode("hello\n\nhello"), (std::vector<TokenId>{id("hello"), id("\n\n"), id("hello")}));
  // Three newlines are no token: one "\n" each (no merge joins them).
  EXPECT_EQ(encode("\n\n\n"), (std::vector<TokenId>{id("\n"), id("\n"), id("\n")}));
  // Merges never cross a newline.
  EXPECT_EQ(encode("a\nb"), (std::vector<TokenId>{id("a"), id("\n"), id("b")}));
}

TEST_F(TokenizerGemma4, UnknownCharactersFallBackToBytes) {
  EXPECT_EQ(encode("é"), (std::vector<TokenId>{byte(0xC3), byte(0xA9)}));
  EXPECT_EQ(encode("\t"), (std::vector<TokenId>{byte('\t')}));
}

// Invalid UTF-8: each bad byte becomes U+FFFD, tokenized like any other
// character (here the vocabulary has it as a token).
TEST_F(TokenizerGemma4, InvalidUtf8BecomesReplacementCharacters) {
  const TokenId fffd = id("\xEF\xBF\xBD");
  EXPECT_EQ(encode("a\xFF"), (std::vector<TokenId>{id("a"), fffd}));
  EXPECT_EQ(encode("\xE2\x82"), (std::vector<TokenId>{fffd, fffd}));            // truncated
  EXPECT_EQ(encode("\xC0\xAF"), (std::vector<TokenId>{fffd, fffd}));            // overlong "/"
  EXPECT_EQ(encode("\xED\xA0\x80"), (std::vector<TokenId>{fffd, fffd, fffd}));  // surrogate
}

TEST_F(TokenizerGemma4, TokenBytes) {
  EXPECT_EQ(model_->token_bytes(id("▁hello")), " hello");
  EXPECT_EQ(model_->token_bytes(byte(0x0A)), "\n");
  EXPECT_EQ(model_->token_bytes(byte(0xC3)), "\xC3");
  EXPECT_EQ(model_->token_bytes(id("<eos>")), "<eos>");
  EXPECT_EQ(model_->token_bytes(-5), "");
  EXPECT_EQ(model_->token_bytes(static_cast<TokenId>(vocab_.size())), "");
}

// Every valid-UTF-8 text decodes back to itself: tokens or bytes cover it all.
TEST_F(TokenizerGemma4, ValidTextRoundTrips) {
  for (const std::string text : {"hello world", " hello\n\n\nhéllo ", "xyz xy \t€😀", ""}) {
    std::string back;
    for (const TokenId t : encode(text)) back += model_->token_bytes(t);
    EXPECT_EQ(back, text);
  }
}

TEST_F(TokenizerGemma4, RandomBytesNeverCrashAndGiveValidIds) {
  test::SplitMix64 rng(0x6E3A4);
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng.next() % 48, '\0');
    for (char& c : text) {
      const uint64_t r = rng.next();
      c = (r & 3) ? static_cast<char>("helo xyzab\n "[r % 13]) : static_cast<char>(r >> 8);
    }
    for (const TokenId t : encode(text)) {
      ASSERT_GE(t, 0);
      ASSERT_LT(static_cast<size_t>(t), vocab_.size());
    }
  }
}

// Many merge sides that are no tokens (the lookup table grows) and a
// duplicated token (its later id wins, as in the peer).
TEST(TokenizerGemma4Table, GrowsAndKeepsTheLaterDuplicate) {
  Vocab v;
  v.kind = TokenizerKind::gemma4;
  v.tokens = {"a", "b", "ab", "c", "ab"};
  v.types.assign(v.tokens.size(), TokenType::normal);
  for (int i = 0; i < 5000; ++i) v.merges.emplace_back("s" + std::to_string(i), "t");
  v.merges.emplace_back("a", "b");
  v.merges.emplace_back("ab", "c");  // "abc" is no token and has no bytes: dropped
  const auto model = make_gemma4_model(v);
  std::vector<TokenId> ids;
  model->encode("ab c", true, ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{4, 3}));  // "▁" has no token and no byte pieces
  ids.clear();
  model->encode("abc", true, ids);
  EXPECT_TRUE(ids.empty());
}

}  // namespace
}  // namespace cortiq
