// The peer's tokenizer tests on real vocabularies: for each
// ../shared/data/vocab/ggml-vocab-NAME.gguf, the strings of NAME.gguf.inp
// must give the ids of NAME.gguf.out (no BOS/EOS, specials not parsed), and
// decoding the ids must give the string back where the tokenizer is lossless.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8_decode.hpp"

namespace cortiq {
namespace {

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;
};

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .inp file: strings separated by "\n__ggml_vocab_test__\n" (the
// separator owns the newlines around it; a trailing one ends the last
// string, as in the peer's test-tokenizer-0).
std::vector<std::string> split_inputs(const std::string& raw) {
  static const std::string kSep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(kSep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + kSep.size();
  }
  return inputs;
}

std::vector<TokenId> parse_ids(std::string_view line) {
  std::vector<TokenId> ids;
  for (std::string_view field : split(line, ' ')) {
    int64_t id = 0;
    if (!field.empty() && parse_int64(field, id)) ids.push_back(static_cast<TokenId>(id));
  }
  return ids;
}

// The strings of the file's .inp with the ids of the file's `out_suffix`
// (".out": no BOS/EOS, specials not parsed).
std::vector<VocabCase> read_cases(const std::filesystem::path& gguf,
                                  const std::string& out_suffix = ".out") {
  const std::vector<std::string> inputs = split_inputs(read_text(gguf.string() + ".inp"));
  std::ifstream out(gguf.string() + out_suffix, std::ios::binary);
  std::vector<VocabCase> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    if (i >= inputs.size()) break;
    cases.push_back({inputs[i], parse_ids(line)});
  }
  EXPECT_EQ(cases.size(), inputs.size()) << ".inp and .out disagree on the number of tests";
  return cases;
}

std::string describe(const Tokenizer& tok, std::span<const TokenId> ids) {
  std::string s;
  for (TokenId id : ids) {
    const bool valid = id >= 0 && static_cast<size_t>(id) < tok.vocab().size();
    s += strfmt("%d '%s' ", id, valid ? tok.vocab().tokens[id].c_str() : "?");
  }
  return s;
}

// Every string of the file's .inp gives the ids of its .out (or of
// `out_suffix`, tokenized with `options`); decoding those ids gives the
// string back where `lossless` says the tokenizer keeps it.
void expect_peer_ids(const std::filesystem::path& path,
                     const std::function<bool(const VocabCase&)>& lossless,
                     TokenizeOptions options = {.add_special = false, .parse_special = false},
                     const std::string& out_suffix = ".out") {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(path));
  const std::vector<VocabCase> cases = read_cases(path, out_suffix);
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  for (const VocabCase& c : cases) {
    const std::vector<TokenId> ids = tok.encode(c.text, options);
    if (ids != c.ids) {
      ++failures;
      ADD_FAILURE() << "input '" << c.text << "'\n  expected " << describe(tok, c.ids)
                    << "\n  got      " << describe(tok, ids);
    }
    if (lossless(c)) {
      EXPECT_EQ(tok.decode(c.ids), c.text) << "decoding the peer's ids";
    }
  }
  EXPECT_EQ(failures, 0) << "of " << cases.size() << " strings";
}

bool utf8_is_valid(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Decoded d = utf8::decode(text, pos);
    if (!d.valid) return false;
    pos += d.len;
  }
  return true;
}

class VocabFile : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFile, MatchesPeerIds) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto path = test::shared_data_dir() / "vocab" / ("ggml-vocab-" + GetParam() + ".gguf");
  if (!std::filesystem::exists(path) || !std::filesystem::exists(path.string() + ".inp")) {
    GTEST_SKIP() << path << " (or its .inp/.out) not found";
  }
  // Decoding gives the text back unless the model normalizes it (WordPiece
  // lowercases and splits) or cleans spaces around punctuation.
  const Vocab vocab = Vocab::from_gguf(gguf::GgufFile::open(path));
  const bool lossless = vocab.kind != TokenizerKind::wpm && !vocab.clean_spaces;
  expect_peer_ids(path, [&](const VocabCase&) { return lossless; });
}

// PLaMo-2's tokenizer on a synthetic vocabulary of ours
// (tools/peer/plamo2_vocab.py: overlapping English, Japanese and emoji
// pieces, score ties, a non-finite score), the ids from llama.cpp
// (tools/peer/make-tokenizer-goldens.sh). Decoding is lossless but for a
// leading U+FEFF, which the tokenizer drops, bytes that are not UTF-8, and
// the control token decoding leaves out.
TEST(VocabFile, Plamo2MatchesPeerIds) {
  const auto path = test::golden_dir() / "tokenizer" / "plamo2-vocab.gguf";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  expect_peer_ids(path, [](const VocabCase& c) {
    return !c.text.starts_with("\xEF\xBB\xBF") && utf8_is_valid(c.text) &&
           c.text.find("<|plamo:bos|>") == std::string::npos;
  });
}

// The RWKV "world" tokenizer on a synthetic vocabulary of ours
// (tools/peer/rwkv_vocab.py: the converter's layout, <s>, the 256 escaped
// bytes, overlapping English and UTF-8 pieces, partial UTF-8 pieces,
// escapes llama.cpp decodes its own way, two texts with the same bytes,
// [PADn] unused tokens), the ids and pieces from llama.cpp
// (tools/peer/make-tokenizer-goldens.sh). Every byte has a token, so
// decoding is lossless but for the specials, which decoding leaves out
// (<s>, the control token) or gives unescaped (the user-defined token).
const std::filesystem::path& rwkv_vocab_path() {
  static const std::filesystem::path path = test::golden_dir() / "tokenizer" / "rwkv-vocab.gguf";
  return path;
}

bool rwkv_lossless(const VocabCase& c) {
  return c.text.find("<s>") == std::string::npos && c.text.find("<tab\\t>") == std::string::npos &&
         c.text.find("<|ctl") == std::string::npos;
}

TEST(VocabFile, RwkvMatchesPeerIds) {
  ASSERT_TRUE(std::filesystem::exists(rwkv_vocab_path())) << rwkv_vocab_path();
  expect_peer_ids(rwkv_vocab_path(), rwkv_lossless);
}

// With add_special and parse_special, as llama.cpp tokenizes them: no BOS
// although the file says add_bos_token = true (the RWKV tokenizer never
// adds one), and the control token is split out where its escaped text is
// written.
TEST(VocabFile, RwkvAddsNoBosAndParsesSpecialsAsThePeer) {
  ASSERT_TRUE(std::filesystem::exists(rwkv_vocab_path())) << rwkv_vocab_path();
  const Vocab vocab = Vocab::from_gguf(gguf::GgufFile::open(rwkv_vocab_path()));
  ASSERT_EQ(vocab.kind, TokenizerKind::rwkv);
  ASSERT_TRUE(vocab.add_bos);  // the file asks; the tokenizer does not add it
  ASSERT_EQ(vocab.bos, 0);
  expect_peer_ids(rwkv_vocab_path(), rwkv_lossless, {.add_special = true, .parse_special = true},
                  ".special.out");
}

// Each token decoded alone gives llama_detokenize's bytes for it (the
// .pieces file: one line of hex per id): the unescaping, uppercase hex and
// all, and which types decode to nothing.
TEST(VocabFile, RwkvPiecesMatchPeer) {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(rwkv_vocab_path()));
  std::ifstream in(rwkv_vocab_path().string() + ".pieces", std::ios::binary);
  std::string line;
  TokenId id = 0;
  int failures = 0;
  for (; std::getline(in, line); ++id) {
    ASSERT_LT(static_cast<size_t>(id), tok.vocab().size());
    const std::vector<TokenId> ids = {id};
    std::string hex;
    for (const unsigned char c : tok.decode(ids)) hex += strfmt("%02x", c);
    if (hex != line) {
      ++failures;
      ADD_FAILURE() << "token " << id << " '" << tok.vocab().tokens[id] << "': expected " << line
                    << ", got " << hex;
    }
  }
  EXPECT_EQ(static_cast<size_t>(id), tok.vocab().size());
  EXPECT_EQ(failures, 0) << "of " << id << " tokens";
}

INSTANTIATE_TEST_SUITE_P(Peer, VocabFile,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2",
                                           "deepseek-coder", "falcon", "bert-bge", "gemma-4"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace cortiq
