// `cortiq tokenize` and `cortiq detokenize` on a generated model (its
// built-in SentencePiece vocabulary) and, when present, a real vocabulary.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliTokenize : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (dir_ / "m.gguf").string();
    std::string out;
    ASSERT_EQ(run_cli("gen-model --arch llama --layers 1 --type F32 -o " + model_, &out), 0) << out;
  }
  test::TempDir dir_;
  std::string model_;
};

TEST_F(CliTokenize, IdsRoundTripThroughDetokenize) {
  std::string ids;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --ids 'the cat sat on the mat'", &ids), 0) << ids;
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.rfind("1 ", 0), 0u) << "BOS first: " << ids;  // the built-in vocabulary's <s>
  EXPECT_EQ(ids.find('\n'), ids.size() - 1) << "one line";
  std::string text;
  ASSERT_EQ(run_cli("detokenize -m " + model_ + " " + ids, &text), 0) << text;
  // The BOS renders as nothing, and the text keeps the space the dummy
  // prefix put before the first word (as the peer's detokenizer does).
  EXPECT_EQ(text, " the cat sat on the mat\n");
}

TEST_F(CliTokenize, NoBosAndDefaultListing) {
  std::string ids;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --ids --no-bos 'the'", &ids), 0) << ids;
  EXPECT_NE(ids.rfind("1 ", 0), 0u) << ids;
  std::string listing;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " 'the'", &listing), 0) << listing;
  EXPECT_TRUE(contains(listing, "'<s>'")) << listing;
  EXPECT_TRUE(contains(listing, "' the'")) << listing;
}

TEST_F(CliTokenize, SpecialTokensAreParsedOnlyWithSpecial) {
  std::string plain, special;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --ids --no-bos '</s>'", &plain), 0) << plain;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --ids --no-bos --special '</s>'", &special), 0)
      << special;
  EXPECT_EQ(special, "2\n");
  EXPECT_NE(plain, "2\n");
}

TEST_F(CliTokenize, JsonAndPiecesAndFileInput) {
  const std::string file = (dir_ / "in.txt").string();
  test::write_file_bytes(file, {'t', 'h', 'e', '\n'});
  std::string json;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --json -f " + file, &json), 0) << json;
  EXPECT_TRUE(contains(json, "\"ids\":[1,")) << json;
  EXPECT_TRUE(contains(json, "\"pieces\":[\"<s>\"")) << json;
  EXPECT_TRUE(contains(json, "\\n")) << json;  // the newline is tokenized too
  std::string pieces;
  ASSERT_EQ(run_cli("tokenize -m " + model_ + " --pieces --no-bos 'the'", &pieces), 0) << pieces;
  EXPECT_TRUE(contains(pieces, "\xe2\x96\x81")) << pieces;  // "▁"
}

TEST_F(CliTokenize, DetokenizeAcceptsListsAndRendersSpecials) {
  std::string a, b;
  ASSERT_EQ(run_cli("detokenize -m " + model_ + " '[1, 2]' --special", &a), 0) << a;
  EXPECT_EQ(a, "<s></s>\n");
  ASSERT_EQ(run_cli("detokenize -m " + model_ + " 1 2", &b), 0) << b;
  EXPECT_EQ(b, "\n");
}

TEST_F(CliTokenize, BadInputIsAClearError) {
  std::string out;
  EXPECT_EQ(run_cli("detokenize -m " + model_ + " 999999", &out), 1);
  EXPECT_TRUE(contains(out, "outside the vocabulary")) << out;
  EXPECT_EQ(run_cli("detokenize -m " + model_ + " abc", &out), 2);
  EXPECT_TRUE(contains(out, "not a token id")) << out;
  EXPECT_EQ(run_cli("tokenize -m " + model_, &out), 2);
  EXPECT_TRUE(contains(out, "TEXT or -f FILE")) << out;
  EXPECT_EQ(run_cli("tokenize 'hi'", &out), 2);
  EXPECT_TRUE(contains(out, "-m FILE")) << out;
  EXPECT_EQ(run_cli("tokenize -m " + model_ + " --ids --json hi", &out), 2);
  EXPECT_EQ(run_cli("tokenize -m " + (dir_ / "missing.gguf").string() + " hi", &out), 1);
}

TEST(CliTokenizeReal, MatchesThePeerOnLlamaSpm) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto path = test::shared_data_dir() / "vocab" / "ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  std::string out;
  ASSERT_EQ(run_cli("tokenize -m " + path.string() + " --ids 'Hello world'", &out), 0) << out;
  EXPECT_EQ(out, "1 15043 3186\n");  // llama-tokenize --ids gives [1, 15043, 3186]
  ASSERT_EQ(run_cli("detokenize -m " + path.string() + " 15043 3186", &out), 0) << out;
  EXPECT_EQ(out, "Hello world\n");
}

}  // namespace
}  // namespace cortiq
