// The RWKV "world" tokenizer (tokenizer_rwkv.cpp) on small hand-made
// vocabularies: greedy longest match over unescaped bytes, the unescaping,
// duplicates, no BOS/EOS, and what happens where no token matches (llama.cpp
// pushes -1, or loops forever; here the unknown token or an error). The
// comparison with llama.cpp's own ids is in test_tokenizer_vocab_files.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

using Ids = std::vector<TokenId>;

constexpr TokenizeOptions kPlain = {.add_special = false, .parse_special = false};

// <s> (control) at 0, then the given escaped texts, all normal.
Vocab rwkv_vocab(const std::vector<std::string>& texts) {
  Vocab v;
  v.kind = TokenizerKind::rwkv;
  v.model_name = "rwkv";
  auto add = [&](const std::string& text, TokenType type) {
    v.token_to_id[text] = static_cast<TokenId>(v.tokens.size());
    v.tokens.push_back(text);
    v.types.push_back(type);
  };
  add("<s>", TokenType::control);
  for (const std::string& t : texts) add(t, TokenType::normal);
  return v;
}

// Token i of the texts given to rwkv_vocab.
constexpr TokenId tok(int i) {
  return static_cast<TokenId>(i + 1);
}

TEST(TokenizerRwkv, GreedyLongestMatch) {
  // 0 a, 1 b, 2 c, 3 d, 4 ab, 5 abc, 6 abcd, 7 bcd, 8 cd
  const Tokenizer t(rwkv_vocab({"a", "b", "c", "d", "ab", "abc", "abcd", "bcd", "cd"}));
  EXPECT_EQ(t.encode("abcd", kPlain), (Ids{tok(6)}));
  EXPECT_EQ(t.encode("abcdabc", kPlain), (Ids{tok(6), tok(5)}));
  // Greedy, not best: "abc" then "d", never "a" "bcd".
  EXPECT_EQ(t.encode("abcbcd", kPlain), (Ids{tok(5), tok(7)}));
  EXPECT_EQ(t.encode("ba", kPlain), (Ids{tok(1), tok(0)}));
  EXPECT_EQ(t.encode("", kPlain), Ids{});
}

// The walk may go deeper than the last token on its path: the match is the
// last node that ends a token, and the text resumes right after it.
TEST(TokenizerRwkv, MatchIsTheLastTokenOnThePathNotTheDeepestNode) {
  // 0 x, 1 y, 2 z, 3 q, 4 xyzzy
  const Tokenizer t(rwkv_vocab({"x", "y", "z", "q", "xyzzy"}));
  EXPECT_EQ(t.encode("xyzzy", kPlain), (Ids{tok(4)}));
  EXPECT_EQ(t.encode("xyzzq", kPlain), (Ids{tok(0), tok(1), tok(2), tok(2), tok(3)}));
  EXPECT_EQ(t.encode("xyzz", kPlain), (Ids{tok(0), tok(1), tok(2), tok(2)}));
}

// Texts as the converter stores them (Python's repr(bytes)[2:-1]), and
// llama.cpp's way with what the converter never writes.
TEST(TokenizerRwkv, UnescapesAsThePeer) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\\t", "\t"},
      {"\\n\\n", "\n\n"},
      {"\\r", "\r"},
      {"\\x00", std::string(1, '\0')},
      {"\\xe4\\xb8\\xad", "\xe4\xb8\xad"},
      {"\\\\", "\\"},
      {"\\'s", "'s"},
      {"say \"it\\'s\"", "say \"it's\""},
      {"\\q", "q"},             // any other escaped character is itself
      {"\\x4A", "Q"},           // c - '0' for 'A': 4 * 16 + 17
      {"\\xA0", "\x10"},        // (17 * 16) mod 256 + 0
      {"\\xC3\\xA9", "3\x19"},  // not "é"
      {"\\x\xc3\xa9", "\xa9"},  // non-ASCII "digits" taken as signed chars
      {"end\\x4", "end"},       // an escape cut short gives nothing
      {"tail\\", "tail"},       // so does a lone backslash
      {"plain text", "plain text"},
      {"\\x5cn", "\\n"},  // an escaped backslash does not escape again
  };
  std::vector<std::string> texts;
  for (const auto& [escaped, bytes] : cases) texts.push_back(escaped);
  const Tokenizer t(rwkv_vocab(texts));
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids ids = {tok(static_cast<int>(i))};
    EXPECT_EQ(t.decode(ids), cases[i].second) << cases[i].first;
  }
  // The text of an uppercase "\x4A" token is 'Q' for matching too.
  EXPECT_EQ(t.encode("Q", kPlain), (Ids{tok(9)}));
}

// Two tokens with the same bytes: the later id, as llama.cpp's trie, built
// in id order, keeps it.
TEST(TokenizerRwkv, LaterIdWinsForTheSameBytes) {
  const Tokenizer t(rwkv_vocab({"h", "i", "hi", "\\x68i", "\\x68"}));
  EXPECT_EQ(t.encode("hi", kPlain), (Ids{tok(3)}));
  EXPECT_EQ(t.encode("h", kPlain), (Ids{tok(4)}));
  EXPECT_EQ(t.decode(Ids{tok(2), tok(3)}), "hihi");
}

// llama.cpp's RWKV branch never adds BOS or EOS, whatever the flags say.
TEST(TokenizerRwkv, NeverAddsBosOrEos) {
  Vocab v = rwkv_vocab({"a"});
  v.bos = 0, v.eos = 0;
  v.add_bos = v.add_eos = true;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(t.encode("a", {.add_special = true, .parse_special = true}), (Ids{tok(0)}));
  EXPECT_EQ(t.encode("<s>a", {.add_special = true, .parse_special = true}), (Ids{0, tok(0)}));
  // Not parsed: the trie has <s>'s bytes too, so it is still id 0, as in llama.cpp.
  EXPECT_EQ(t.encode("<s>a", {.add_special = true, .parse_special = false}), (Ids{0, tok(0)}));
}

// Every type decodes to its unescaped bytes; control (and unknown) tokens
// only when specials are rendered.
TEST(TokenizerRwkv, DecodesEveryTypeUnescaped) {
  Vocab v = rwkv_vocab({"a\\tb", "[PAD2]", "<u\\n>"});
  v.types[2] = TokenType::unused;
  v.types[3] = TokenType::user_defined;
  v.tokens.push_back("<c\\n>");
  v.types.push_back(TokenType::control);
  v.token_to_id["<c\\n>"] = 4;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(t.decode(Ids{1, 2, 3, 4, 0}), "a\tb[PAD2]<u\n>");
  EXPECT_EQ(t.decode(Ids{1, 2, 3, 4, 0}, /*render_special=*/true), "a\tb[PAD2]<u\n><c\n><s>");
  // User-defined tokens are split out as written, escapes and all.
  EXPECT_EQ(t.encode("<u\\n>", kPlain), (Ids{3}));
}

// A byte no token starts with, and a byte that only longer tokens start
// with (llama.cpp's loop would restart the fragment forever there): the
// unknown token stands for the one byte when the file names one.
TEST(TokenizerRwkv, UnmatchedByteIsTheUnknownToken) {
  // 0 <unk>, 1 x, 2 \n\n
  Vocab v = rwkv_vocab({"<unk>", "x", "\\n\\n"});
  v.types[1] = TokenType::unknown;
  v.unk = 1;
  const Tokenizer t(std::move(v));
  EXPECT_EQ(t.encode("yx", kPlain), (Ids{1, 2}));
  EXPECT_EQ(t.encode("x\nx", kPlain), (Ids{2, 1, 2}));
  EXPECT_EQ(t.encode("\n\n\nx", kPlain), (Ids{3, 1, 2}));
  EXPECT_EQ(t.encode("\n", kPlain), (Ids{1}));
}

// Without an unknown token llama.cpp would emit id -1 (or hang); here the
// text is refused, naming the byte, rather than give an id outside the
// vocabulary.
TEST(TokenizerRwkv, UnmatchedByteWithoutUnknownTokenIsAnError) {
  const Tokenizer t(rwkv_vocab({"x", "\\n\\n"}));
  EXPECT_EQ(t.encode("x\n\nx", kPlain), (Ids{tok(0), tok(1), tok(0)}));
  for (const std::string text : {"xy", "x\nx", "\n"}) {
    try {
      t.encode(text, kPlain);
      ADD_FAILURE() << "no error for '" << text << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(text == "xy" ? "0x79" : "0x0A"), std::string::npos) << what;
      EXPECT_NE(what.find("unknown token"), std::string::npos) << what;
    }
  }
}

// Vocab::from_gguf: "rwkv" is known, with llama.cpp's defaults (no special
// ids, nothing added, no dummy prefix) unless the file's keys say.
TEST(TokenizerRwkv, VocabDefaults) {
  gguf::Array tokens = gguf::Array::of(gguf::ValueType::string);
  tokens.items = std::vector<std::string>{"<s>", "a", "\\n\\n"};
  gguf::GgufWriter w;
  w.set("general.architecture", std::string("rwkv7"));
  w.set("tokenizer.ggml.model", std::string("rwkv"));
  w.set("tokenizer.ggml.tokens", gguf::Value(tokens));
  w.begin_in_memory();
  const Vocab v = Vocab::from_gguf(gguf::GgufFile::parse(w.finish_in_memory()));
  EXPECT_EQ(v.kind, TokenizerKind::rwkv);
  EXPECT_EQ(v.bos, kNoToken);
  EXPECT_EQ(v.eos, kNoToken);
  EXPECT_EQ(v.unk, kNoToken);
  EXPECT_EQ(v.pad, kNoToken);
  EXPECT_FALSE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_FALSE(v.clean_spaces);
  const Tokenizer t(Vocab{v});
  EXPECT_EQ(t.encode("a\n\na", {.add_special = true}), (Ids{1, 2, 1}));
}

// Random bytes through the golden vocabulary (every byte has a token, and
// the specials' texts are unlikely in random bytes): only ids inside the
// vocabulary, and the bytes come back. Pieces the vocabulary has (and
// partial UTF-8 sequences) glued in at random exercise the longer matches.
TEST(TokenizerRwkv, RandomBytesRoundTripOnTheGoldenVocabulary) {
  const Tokenizer t = Tokenizer::from_gguf(
      gguf::GgufFile::open(test::golden_dir() / "tokenizer" / "rwkv-vocab.gguf"));
  const std::vector<std::string> pieces = {"hello", " world",   "abcd",  "\n\n", "xyzz", "\xe3",
                                           "\x81",  "\xf0\x9f", "12345", "it's", " "};
  test::SplitMix64 rng(11);
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const size_t parts = rng.next() % 24;
    for (size_t i = 0; i < parts; ++i) {
      if (rng.next() % 2) {
        text.push_back(static_cast<char>(rng.next() & 0xFF));
      } else {
        text += pieces[rng.next() % pieces.size()];
      }
    }
    const std::vector<TokenId> ids = t.encode(text, kPlain);
    for (const TokenId id : ids) ASSERT_LT(static_cast<size_t>(id), t.vocab().size());
    EXPECT_EQ(t.decode(ids), text) << "round " << round;
  }
}

}  // namespace
}  // namespace cortiq
