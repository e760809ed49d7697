// The Unigram tokenizer (tokenizer.ggml.model = "t5") against llama.cpp.
//
// tests/golden/tokenizer/unigram-{t5,plain}.gguf are generated Unigram
// vocabularies with a precompiled charsmap (tools/peer/make_unigram_goldens.py;
// t5: dummy prefix and whitespace merging on, plain: llama.cpp's defaults);
// unigram-NAME.tsv holds llama.cpp's ids (llama-tokenize, no BOS/EOS, specials
// not parsed) for the strings of ../shared/data/vocab/*.inp (named there, not
// copied), hand-written strings and seeded random ones, and whether
// llama_detokenize gives each string back (else a hash of what it gives).
// Also: the t5 defaults, a small vocabulary whose segmentation is worked out
// by hand, and malformed charsmaps, missing scores and a missing unknown
// token refused with the key at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "test_support.hpp"
#include "tokenizer/charsmap.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

constexpr const char* kCharsmapKey = "tokenizer.ggml.precompiled_charsmap";

std::filesystem::path unigram_vocab(const std::string& variant) {
  return test::golden_dir() / "tokenizer" / ("unigram-" + variant + ".gguf");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .inp format of the shared vocab files: strings separated by
// "\n__ggml_vocab_test__\n" (split as test_tokenizer_vocab_files.cpp does).
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

// The golden's text column: "\\" is a backslash, "\xHH" a byte.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
    } else if (s[i + 1] == '\\') {
      out.push_back('\\');
      ++i;
    } else if (s[i + 1] == 'x' && i + 3 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 2, 2)), nullptr, 16)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

struct GoldenCase {
  std::string key;   // "inp:FILE:INDEX", "hand:N", "random:KIND:N", ...
  std::string text;  // empty for inp: cases until resolved
  std::vector<TokenId> ids;
  std::string decoded;  // "=" or "fnv1a64:HEX" of llama_detokenize's bytes
};

std::vector<GoldenCase> read_goldens(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<GoldenCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string_view> fields = split(line, '\t');
    if (fields.size() != 4) {
      ADD_FAILURE() << path << ": bad line " << line;
      continue;
    }
    GoldenCase c{std::string(fields[0]), unescape(fields[1]), {}, std::string(fields[3])};
    for (std::string_view id : split(fields[2], ' ')) {
      int64_t value = 0;
      if (!id.empty() && parse_int64(id, value)) c.ids.push_back(static_cast<TokenId>(value));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Resolves "inp:FILE:INDEX" to the string in ../shared/data/vocab/FILE;
// false when the shared data is absent.
bool resolve_inp(GoldenCase& c, std::map<std::string, std::vector<std::string>>& inp_files) {
  const std::vector<std::string_view> parts = split(c.key, ':');
  const std::filesystem::path shared = test::shared_data_dir();
  if (parts.size() != 3 || shared.empty()) return false;
  const std::string file(parts[1]);
  if (!inp_files.contains(file)) {
    const std::filesystem::path path = shared / "vocab" / file;
    inp_files[file] =
        std::filesystem::exists(path) ? split_inputs(read_text(path)) : std::vector<std::string>();
  }
  int64_t index = 0;
  const std::vector<std::string>& inputs = inp_files[file];
  if (!parse_int64(parts[2], index) || index < 0 || static_cast<size_t>(index) >= inputs.size()) {
    return false;
  }
  c.text = inputs[static_cast<size_t>(index)];
  return true;
}

std::string describe(const Tokenizer& tok, std::span<const TokenId> ids) {
  std::string s;
  for (TokenId id : ids) {
    s += strfmt("%d '%s' ", id, std::string(tok.vocab().token_text(id)).c_str());
  }
  return s;
}

class UnigramGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(UnigramGolden, MatchesLlamaCppIds) {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(unigram_vocab(GetParam())));
  ASSERT_EQ(tok.vocab().kind, TokenizerKind::ugm);
  const std::vector<GoldenCase> goldens =
      read_goldens(test::golden_dir() / "tokenizer" / ("unigram-" + GetParam() + ".tsv"));
  ASSERT_GT(goldens.size(), 400u);
  std::map<std::string, std::vector<std::string>> inp_files;
  size_t compared = 0, skipped = 0, mismatched = 0, lossless = 0;
  for (GoldenCase c : goldens) {
    if (starts_with(c.key, "inp:") && !resolve_inp(c, inp_files)) {
      ++skipped;
      continue;
    }
    ++compared;
    const std::vector<TokenId> ids =
        tok.encode(c.text, {.add_special = false, .parse_special = false});
    if (ids != c.ids) {
      ++mismatched;
      ADD_FAILURE() << c.key << " '" << c.text << "'\n  llama.cpp " << describe(tok, c.ids)
                    << "\n  cortiq    " << describe(tok, ids);
    }
    // Decoding llama.cpp's ids gives what llama_detokenize gives: the text
    // itself where the round trip is lossless.
    const std::string decoded = tok.decode(c.ids);
    if (c.decoded == "=") {
      ++lossless;
      EXPECT_EQ(decoded, c.text) << c.key;
    } else {
      EXPECT_EQ(strfmt("fnv1a64:%016llx", static_cast<unsigned long long>(fnv1a64(decoded))),
                c.decoded)
          << c.key << ": decoded '" << decoded << "'";
    }
  }
  EXPECT_EQ(mismatched, 0u) << "of " << compared << " strings";
  EXPECT_GT(lossless, 0u);
  if (skipped > 0) {
    std::cout << "[ INFO     ] " << skipped
              << " strings of ../shared/data/vocab/*.inp skipped (shared data absent)\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Peer, UnigramGolden, ::testing::Values("t5", "plain"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(UnigramVocab, T5DefaultsAndFlagsFromTheFile) {
  const Vocab t5 = Vocab::from_gguf(gguf::GgufFile::open(unigram_vocab("t5")));
  EXPECT_EQ(t5.model_name, "t5");
  EXPECT_EQ(t5.pad, 0);
  EXPECT_EQ(t5.eos, 1);
  EXPECT_EQ(t5.unk, 2);
  EXPECT_EQ(t5.bos, kNoToken);  // T5 has no BOS
  EXPECT_FALSE(t5.add_bos);
  EXPECT_TRUE(t5.add_eos);  // llama.cpp's default for UGM
  EXPECT_TRUE(t5.add_space_prefix);
  EXPECT_TRUE(t5.remove_extra_whitespaces);
  EXPECT_FALSE(t5.clean_spaces);
  EXPECT_FALSE(t5.precompiled_charsmap.empty());
  EXPECT_TRUE(t5.is_end_of_generation(1));

  // No flag keys: no dummy prefix, no merging (llama.cpp's defaults); the
  // charsmap is stored as i8 there.
  const Vocab plain = Vocab::from_gguf(gguf::GgufFile::open(unigram_vocab("plain")));
  EXPECT_FALSE(plain.add_space_prefix);
  EXPECT_FALSE(plain.remove_extra_whitespaces);
  EXPECT_EQ(plain.precompiled_charsmap, t5.precompiled_charsmap);

  const Tokenizer tok(t5);
  const std::vector<TokenId> ids = tok.encode("hello world");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 1);  // </s>
  EXPECT_EQ(tok.decode(ids), "hello world");
  EXPECT_EQ(tok.decode(ids, /*render_special=*/true), "hello world</s>");
}

// A vocabulary small enough to work the Viterbi out by hand.
Vocab tiny_ugm_vocab() {
  Vocab v;
  v.kind = TokenizerKind::ugm;
  v.model_name = "t5";
  auto add = [&](std::string text, TokenType type, float score) {
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
    v.scores.push_back(score);
  };
  add("<pad>", TokenType::control, 0);
  add("</s>", TokenType::control, 0);
  add("<unk>", TokenType::unknown, 0);
  add("▁", TokenType::normal, -2);
  add("a", TokenType::normal, -3);
  add("b", TokenType::normal, -3);
  add("ab", TokenType::normal, -5);     // beats a + b (-6)
  add("▁ab", TokenType::normal, -6.5);  // beats ▁ + ab (-7)
  add("c", TokenType::normal, -4);
  add("bc", TokenType::normal, -6);           // a + bc = -9 = ab + c: a tie
  add("abx", TokenType::user_defined, -100);  // user-defined tokens score 0
  add("▁zz", TokenType::unused, -1);          // unused: matched, decodes to nothing
  for (TokenId id = 0; id < static_cast<TokenId>(v.tokens.size()); ++id) {
    v.token_to_id[v.tokens[id]] = id;
  }
  v.pad = 0, v.eos = 1, v.unk = 2;
  return v;
}

TEST(UnigramModel, ViterbiByHand) {
  Vocab v = tiny_ugm_vocab();
  v.add_space_prefix = true;
  const Tokenizer tok(v);
  const auto encode = [&](std::string_view text) {
    return tok.encode(text, {.add_special = false, .parse_special = false});
  };
  const auto id = [&](std::string_view text) { return *tok.vocab().find(text); };
  EXPECT_EQ(encode("ab"), (std::vector<TokenId>{id("▁ab")}));
  // "▁abc": ▁ab + c = -10.5 beats ▁ + a + bc = ▁ + ab + c = -11.
  EXPECT_EQ(encode("abc"), (std::vector<TokenId>{id("▁ab"), id("c")}));
  // Unknown characters: one <unk> per run, however many characters.
  EXPECT_EQ(encode("a%%é%b"), (std::vector<TokenId>{id("▁"), id("a"), 2, id("b")}));
  // A user-defined token is split out of the text before the model sees it.
  EXPECT_EQ(encode("abx"), (std::vector<TokenId>{id("abx")}));
  EXPECT_EQ(encode("zz"), (std::vector<TokenId>{id("▁zz")}));
  EXPECT_EQ(tok.decode(encode("zz")), "");

  // Without the dummy prefix, and with spaces kept as they are.
  const Tokenizer plain(tiny_ugm_vocab());
  // a + bc and ab + c tie at -9: the path whose last token starts first stays.
  EXPECT_EQ(plain.encode("abc", {.add_special = false}), (std::vector<TokenId>{id("a"), id("bc")}));
  EXPECT_EQ(plain.encode("a  b", {.add_special = false}),
            (std::vector<TokenId>{id("a"), id("▁"), id("▁"), id("b")}));
  EXPECT_EQ(plain.encode("", {.add_special = false}), (std::vector<TokenId>{}));
}

// Every fragment is normalized alone: the dummy prefix follows each
// user-defined token, and whitespace merging drops spaces at fragment ends.
TEST(UnigramModel, EachFragmentGetsItsOwnPrefix) {
  Vocab v = tiny_ugm_vocab();
  v.add_space_prefix = true;
  v.remove_extra_whitespaces = true;
  const Tokenizer tok(v);
  const auto id = [&](std::string_view text) { return *tok.vocab().find(text); };
  EXPECT_EQ(tok.encode("  ab   abx ab  ", {.add_special = false}),
            (std::vector<TokenId>{id("▁ab"), id("abx"), id("▁ab")}));
}

// The generated charsmap's rules (NFKC-like) seen through the ids: a
// normalized text tokenizes as its normal form does.
TEST(UnigramModel, CharsmapNormalizesBeforeSegmenting) {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(unigram_vocab("t5")));
  const auto encode = [&](std::string_view text) {
    return tok.encode(text, {.add_special = false, .parse_special = false});
  };
  EXPECT_EQ(encode("ｈｅｌｌｏ　ｗｏｒｌｄ"), encode("hello world"));  // full-width, U+3000
  EXPECT_EQ(encode("ﬁnd the ﬂow"), encode("find the flow"));           // ligatures
  EXPECT_EQ(encode("cafe\xcc\x81"), encode("caf\xc3\xa9"));            // e + U+0301 -> é
  EXPECT_EQ(encode("ｶﾞ"), encode("ガ"));                               // the longest rule wins
  EXPECT_EQ(encode("½"), encode("1⁄2"));
  EXPECT_EQ(encode("a\u200b\u00adb\x01"), encode("ab"));  // deleted
  EXPECT_EQ(encode("one\ttwo\nthree"), encode("one two three"));
  EXPECT_NE(encode("one\rtwo"), encode("one two"));  // '\r' has no rule: unknown
  EXPECT_EQ(tok.decode(encode("ｈｅｌｌｏ")), "hello");
}

TEST(UnigramModel, RandomBytesNeverCrash) {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(unigram_vocab("t5")));
  test::SplitMix64 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng.next() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng.next());
    const std::vector<TokenId> ids =
        tok.encode(text, {.add_special = false, .parse_special = true});
    for (TokenId id : ids) ASSERT_LT(static_cast<size_t>(id), tok.vocab().size());
    (void)tok.decode(ids);
  }
}

// The t5 file's metadata with some keys replaced (a value-less Value drops the key).
std::vector<std::byte> t5_with(const std::map<std::string, std::optional<gguf::Value>>& changes) {
  const gguf::GgufFile file = gguf::GgufFile::open(unigram_vocab("t5"));
  gguf::GgufWriter w;
  for (const gguf::KeyValue& kv : file.metadata()) {
    const auto it = changes.find(kv.key);
    if (it == changes.end()) {
      w.set(kv.key, kv.value);
    } else if (it->second) {
      w.set(kv.key, *it->second);
    }
  }
  for (const auto& [key, value] : changes) {
    if (value && !file.find(key)) w.set(key, *value);
  }
  w.begin_in_memory();
  return w.finish_in_memory();
}

gguf::Value u8_array(std::vector<uint8_t> bytes) {
  gguf::Array a = gguf::Array::of(gguf::ValueType::u8);
  a.items = std::move(bytes);
  return a;
}

std::string load_error(const std::vector<std::byte>& bytes) {
  try {
    const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::parse(bytes, "v.gguf"));
    // A charsmap that loads must never misbehave: ASan/UBSan builds watch this.
    for (std::string_view text : {"hello world", "ＡＢＣ ｶﾞ ﬁ e\xcc\x81", "\xff\xfe\x01 x"}) {
      (void)tok.decode(tok.encode(text));
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> t5_charsmap() {
  return Vocab::from_gguf(gguf::GgufFile::open(unigram_vocab("t5"))).precompiled_charsmap;
}

TEST(UnigramVocab, RefusesMalformedCharsmaps) {
  const std::vector<uint8_t> good = t5_charsmap();
  ASSERT_GT(good.size(), 8u);
  const auto error_for = [](std::vector<uint8_t> blob) {
    return load_error(t5_with({{kCharsmapKey, u8_array(std::move(blob))}}));
  };
  EXPECT_EQ(error_for(good), "");

  const auto expect_error = [](const std::string& error, std::string_view what) {
    EXPECT_NE(error.find(kCharsmapKey), std::string::npos) << error;
    EXPECT_NE(error.find(what), std::string::npos) << error;
  };
  expect_error(error_for({}), "too short");
  expect_error(error_for({1, 0, 0}), "too short");
  // The trie size says more than there is, or leaves no strings after it.
  std::vector<uint8_t> blob = good;
  blob.resize(blob.size() / 2);
  expect_error(error_for(blob), "leaves no replacement strings");
  blob = good;
  blob[0] ^= 1;  // not a whole number of units
  expect_error(error_for(blob), "not a whole number");
  // Strings cut short: the last replacement loses its terminator (or, if it
  // was empty, its offset now lies past the end).
  blob = good;
  blob.pop_back();
  expect_error(error_for(blob), "replacement");
  // Wrong element type, or not an array at all.
  gguf::Array floats = gguf::Array::of(gguf::ValueType::f32);
  floats.items = std::vector<float>{1, 2, 3, 4, 5};
  expect_error(load_error(t5_with({{kCharsmapKey, floats}})), "expected an array of u8 or i8");
  EXPECT_NE(load_error(t5_with({{kCharsmapKey, std::string("oops")}})).find(kCharsmapKey),
            std::string::npos);
}

// Every truncation of the blob, and the trie with a unit's bytes
// overwritten by absurd values, either loads (and then tokenizes safely) or
// is refused with the key named; never undefined behaviour.
TEST(UnigramVocab, TruncatedOrCorruptCharsmapsAreErrorsNeverCrashes) {
  const std::vector<uint8_t> good = t5_charsmap();
  const auto check = [](const std::vector<uint8_t>& blob) {
    try {
      const PrecompiledCharsmap charsmap(blob);
      for (std::string_view text : {"ＡＢＣ ｶﾞ ﬁ", "e\xcc\x81 \xe2\x80\x8b x", "\t\x01\xff"}) {
        for (size_t i = 0; i < text.size(); ++i) (void)charsmap.longest_match(text.substr(i));
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(kCharsmapKey), std::string::npos) << e.what();
    }
  };
  for (size_t n = 0; n < good.size(); ++n) {
    check(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(n)));
  }
  const uint32_t trie_bytes = good[0] | good[1] << 8 | good[2] << 16 | uint32_t{good[3]} << 24;
  test::SplitMix64 rng(11);
  size_t refused = 0;
  for (uint32_t unit = 0; unit < trie_bytes / 4; ++unit) {
    for (uint32_t value : {0u, 0xFFFFFFFFu, static_cast<uint32_t>(rng.next()),
                           static_cast<uint32_t>(rng.next()) & 0x3FFu}) {
      std::vector<uint8_t> blob = good;
      for (int k = 0; k < 4; ++k) blob[4 + unit * 4 + k] = static_cast<uint8_t>(value >> (8 * k));
      try {
        (void)PrecompiledCharsmap(blob);
      } catch (const Error&) {
        ++refused;
      }
      check(blob);
    }
  }
  EXPECT_GT(refused, 0u);
}

TEST(UnigramVocab, RefusesMissingScoresAndUnknownToken) {
  const std::string no_scores = load_error(t5_with({{"tokenizer.ggml.scores", std::nullopt}}));
  EXPECT_NE(no_scores.find("tokenizer.ggml.scores is missing"), std::string::npos) << no_scores;

  gguf::Array tokens = gguf::Array::of(gguf::ValueType::string);
  tokens.items = std::vector<std::string>{"<pad>", "a"};
  gguf::Array scores = gguf::Array::of(gguf::ValueType::f32);
  scores.items = std::vector<float>{0, -1};
  gguf::Array types = gguf::Array::of(gguf::ValueType::i32);
  types.items = std::vector<int32_t>{3, 1};
  const std::string no_unk =
      load_error(t5_with({{"tokenizer.ggml.tokens", tokens},
                          {"tokenizer.ggml.scores", scores},
                          {"tokenizer.ggml.token_type", types},
                          {"tokenizer.ggml.eos_token_id", std::nullopt},
                          {"tokenizer.ggml.unknown_token_id", std::nullopt},
                          {"tokenizer.ggml.padding_token_id", std::nullopt}}));
  EXPECT_NE(no_unk.find("tokenizer.ggml.unknown_token_id"), std::string::npos) << no_unk;

  // A hand-built vocabulary without scores is refused by the model itself.
  Vocab v = tiny_ugm_vocab();
  v.scores.clear();
  EXPECT_THROW(Tokenizer{std::move(v)}, Error);
}

}  // namespace
}  // namespace cortiq
