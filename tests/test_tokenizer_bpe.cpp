// Byte-level BPE: the GPT-2 byte alphabet, the pre-tokenizer regex sets, the
// merge loop on a hand-made vocabulary, robustness on arbitrary bytes, and
// the peer's vocabulary test vectors for the five BPE files.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gguf/gguf_file.hpp"
#include "test_support.hpp"
#include "tokenizer/byte_unicode.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer_model.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {
namespace {

using Words = std::vector<std::string>;

Words split(std::string_view pre, std::string_view text) {
  std::vector<std::string_view> views;
  PreTokenizer(pre).split(text, views);
  return Words(views.begin(), views.end());
}

TEST(ByteUnicode, AllBytesRoundTrip) {
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    const uint32_t cp = byte_to_codepoint(byte);
    EXPECT_TRUE(seen.insert(cp).second) << "code point used twice: " << cp;
    ASSERT_EQ(codepoint_to_byte(cp), byte);
    const std::string one(1, static_cast<char>(byte));
    EXPECT_EQ(byte_decode(byte_encode(one)), one);
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_decode(byte_encode(all)), all);
}

TEST(ByteUnicode, KnownCharacters) {
  EXPECT_EQ(byte_encode(" "), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_encode("\n"), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_encode("a!~"), "a!~");
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);  // the last shifted byte
  EXPECT_EQ(byte_decode("\xC4\xA0hello"), " hello");
  EXPECT_EQ(byte_decode("<|im_end|> \xE4\xB8\xAD"), std::nullopt);  // outside the alphabet
  EXPECT_EQ(byte_decode("\xC4"), std::nullopt);                     // truncated
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's  test 123\n"),
            (Words{"Hello", " world", "'s", " ", " test", " 123", "\n"}));
  EXPECT_EQ(split("gpt-2", "I'm  done!!  ok"), (Words{"I", "'m", " ", " done", "!!", " ", " ok"}));
  // U+0085 is white space for the peer (PCRE2's UCP \s alone would miss it).
  EXPECT_EQ(split("gpt-2", "!\xC2\x85"), (Words{"!", "\xC2\x85"}));
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "Hello, WORLD'S 12345\n\n  x"),
            (Words{"Hello", ",", " WORLD", "'S", " ", "123", "45", "\n\n", " ", " x"}));
  EXPECT_EQ(split("llama-bpe", "  (a)\r\n"), (Words{" ", " (", "a", ")\r\n"}));
  EXPECT_TRUE(PreTokenizer("llama-bpe").ignore_merges());
  EXPECT_FALSE(PreTokenizer("gpt-2").ignore_merges());
}

TEST(PreTokenizer, Qwen2) {
  EXPECT_EQ(split("qwen2", "abc 12345"), (Words{"abc", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("qwen2", "\xE4\xBD\xA0\xE5\xA5\xBD, you're"),  // 你好
            (Words{"\xE4\xBD\xA0\xE5\xA5\xBD", ",", " you", "'re"}));
}

TEST(PreTokenizer, DigitGroupsAndUnknownName) {
  EXPECT_EQ(split("tiny_aya", "1234567"), (Words{"1", "234", "567"}));
  EXPECT_EQ(split("deepseek-coder", "ab 12"), (Words{"ab", " ", "1", "2"}));
  PreTokenizer fallback("no-such-pre-tokenizer");
  EXPECT_EQ(fallback.name(), "default");
}

TEST(PreTokenizer, EveryKnownNameCompiles) {
  for (const char* name : {"default",      "llama-bpe",
                           "qwen2",        "qwen35",
                           "deepseek-llm", "deepseek-coder",
                           "deepseek-v3",  "falcon",
                           "starcoder",    "refact",
                           "mpt",          "gpt-2",
                           "command-r",    "smollm",
                           "olmo",         "gpt-4o",
                           "tekken",       "kimi-k2",
                           "glm4",         "hunyuan",
                           "seed-coder",   "jais-2",
                           "youtu",        "chameleon",
                           "superbpe",     "bailingmoe",
                           "afmoe",        "laguna",
                           "exaone-moe",   "minicpm5",
                           "poro-chat",    "viking",
                           "tiny_aya",     "granite-embed-multi-97m"}) {
    PreTokenizer pre(name);
    EXPECT_EQ(pre.name(), name);
    std::vector<std::string_view> words;
    const std::string text = "Hello WORLD, it's 12345 \xE4\xBD\xA0\xE5\xA5\xBD  \n\n x";
    pre.split(text, words);
    std::string joined;
    for (auto w : words) {
      EXPECT_FALSE(w.empty()) << name;
      joined += w;
    }
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(PreTokenizer, Utf8Sanitizing) {
  EXPECT_TRUE(is_valid_utf8("plain \xE4\xBD\xA0"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(is_valid_utf8("\xE4\xBD"));      // truncated
  EXPECT_EQ(sanitize_utf8("a\xE4\xBD"
                          "b"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("\x80x"), "\xEF\xBF\xBDx");
}

// A small vocabulary: the 256 byte characters, then a few merged tokens.
Vocab tiny_vocab(std::string pre, std::vector<std::pair<std::string, std::string>> merges,
                 std::vector<std::string> extra_tokens) {
  Vocab v;
  v.kind = TokenizerKind::bpe;
  v.model_name = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_utf8(static_cast<uint8_t>(b)));
  for (auto& t : extra_tokens) v.tokens.push_back(t);
  v.types.assign(v.tokens.size(), TokenType::normal);
  v.merges = std::move(merges);
  for (size_t i = 0; i < v.tokens.size(); ++i) v.token_to_id[v.tokens[i]] = static_cast<TokenId>(i);
  return v;
}

TokenId id_of(const Vocab& v, const std::string& text) {
  return v.token_to_id.at(text);
}

TEST(BpeModel, MergesByRankThenLeftmost) {
  const Vocab v = tiny_vocab("gpt-2", {{"b", "c"}, {"a", "b"}, {"ab", "c"}, {"a", "a"}},
                             {"bc", "ab", "abc", "aa"});
  auto model = make_bpe_model(v);
  std::vector<TokenId> ids;
  model->encode("abc", true, ids);  // b+c ranks first, so "ab" never forms
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(v, "a"), id_of(v, "bc")}));
  ids.clear();
  model->encode("aaa", true, ids);  // equal ranks: the leftmost pair merges first
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(v, "aa"), id_of(v, "a")}));
  ids.clear();
  model->encode("ab ab", true, ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(v, "ab"), id_of(v, "\xC4\xA0"), id_of(v, "ab")}));
  EXPECT_EQ(model->token_bytes(id_of(v, "\xC4\xA0")), " ");
}

TEST(BpeModel, IgnoreMergesUsesWholeWordTokens) {
  // "xyz" cannot be reached by merges, but llama3-style vocabularies take a
  // whole word that is a token as it is.
  const Vocab llama = tiny_vocab("llama-bpe", {}, {"xyz"});
  std::vector<TokenId> ids;
  make_bpe_model(llama)->encode("xyz", true, ids);
  EXPECT_EQ(ids, (std::vector<TokenId>{id_of(llama, "xyz")}));
  const Vocab gpt2 = tiny_vocab("gpt-2", {}, {"xyz"});
  ids.clear();
  make_bpe_model(gpt2)->encode("xyz", true, ids);
  EXPECT_EQ(ids.size(), 3u);
}

TEST(BpeModel, RandomBytesNeverCrashAndRoundTrip) {
  const Vocab v = tiny_vocab("llama-bpe", {{"\xC4\xA0", "a"}, {"e", "r"}},
                             {"\xC4\xA0"
                              "a",
                              "er"});
  for (const char* pre : {"llama-bpe", "gpt-2", "qwen2", "deepseek-coder", "falcon", "default",
                          "kimi-k2", "gpt-4o", "tekken", "deepseek-llm"}) {
    Vocab copy = v;
    copy.pre = pre;
    auto model = make_bpe_model(copy);
    test::SplitMix64 rng(42);
    for (int round = 0; round < 300; ++round) {
      std::string text(rng.next() % 48, '\0');
      for (auto& c : text) c = static_cast<char>(rng.next() & 0xFF);
      std::vector<TokenId> ids;
      model->encode(text, true, ids);
      std::string back;
      for (TokenId id : ids) back += model->token_bytes(id);
      // Invalid UTF-8 comes back as U+FFFD, one per bad byte.
      EXPECT_EQ(back, sanitize_utf8(text)) << pre;
    }
  }
}

// The peer's test vectors: strings separated by "\n__ggml_vocab_test__\n",
// expected ids (no BOS, specials not parsed) one line each.
struct VocabCase {
  std::vector<std::string> inputs;
  std::vector<std::string> expected;
};

VocabCase read_vocab_case(const std::filesystem::path& gguf) {
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  VocabCase c;
  const std::string raw = slurp(gguf.string() + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      c.inputs.push_back(raw.substr(pos));
      break;
    }
    c.inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(slurp(gguf.string() + ".out"));
  for (std::string line; std::getline(out, line);) c.expected.push_back(line);
  return c;
}

class BpeVocabFile : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeVocabFile, MatchesPeerVectors) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto path =
      test::shared_data_dir() / "vocab" / (std::string("ggml-vocab-") + GetParam() + ".gguf");
  const auto file = gguf::GgufFile::open(path);
  const Vocab vocab = Vocab::from_gguf(file);
  const auto model = make_bpe_model(vocab);
  const VocabCase c = read_vocab_case(path);
  ASSERT_EQ(c.inputs.size(), c.expected.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::vector<TokenId> ids;
    model->encode(c.inputs[i], true, ids);
    std::string got;
    for (TokenId id : ids) got += " " + std::to_string(id);
    EXPECT_EQ(got, c.expected[i]) << "input #" << i << ": '" << c.inputs[i] << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Peer, BpeVocabFile,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "deepseek-coder",
                                           "falcon"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace cortiq
