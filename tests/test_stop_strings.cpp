// Stop strings over streamed pieces: split stops, several stops, overlapping
// prefixes, UTF-8 (never half a character out), and a randomized check
// against the plain answer (the text before the first occurrence).
#include <string>
#include <vector>

#include "base/random.hpp"
#include "runtime/stop_strings.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

struct Streamed {
  std::vector<std::string> emits;
  std::string text;  // every emit, then the flush when no stop matched
  bool stopped = false;
};

Streamed feed(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  Streamed run;
  for (const std::string& piece : pieces) {
    const auto r = m.push(piece);
    run.emits.push_back(r.emit);
    run.text += r.emit;
    if (r.stopped) {
      run.stopped = true;
      break;
    }
  }
  if (!run.stopped) run.text += m.flush();
  return run;
}

// True when `s` is a sequence of complete, well-formed UTF-8 characters.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    if (b < 0x80) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopStrings, NoStopsPassEverythingThrough) {
  StopStringMatcher m;
  EXPECT_EQ(m.push("Hello").emit, "Hello");
  EXPECT_EQ(m.push(" world").emit, " world");
  EXPECT_EQ(m.flush(), "");
  StopStringMatcher empty({"", ""});  // empty strings are ignored
  EXPECT_EQ(empty.push("abc").emit, "abc");
  EXPECT_FALSE(empty.stopped());
}

TEST(StopStrings, StopSplitAcrossPieces) {
  StopStringMatcher m({"STOP"});
  auto r = m.push("Hello ");
  EXPECT_EQ(r.emit, "Hello ");
  EXPECT_FALSE(r.stopped);
  r = m.push("wor");
  EXPECT_EQ(r.emit, "wor");
  r = m.push("ld ST");
  EXPECT_EQ(r.emit, "ld ");  // "ST" may start the stop string
  EXPECT_FALSE(r.stopped);
  r = m.push("OP more");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_TRUE(m.stopped());
  // After the stop, nothing more comes out.
  r = m.push("later");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStrings, OneByteAtATime) {
  StopStringMatcher m({"</end>"});
  const std::string text = "a</b></e</end>tail";
  std::vector<std::string> pieces;
  for (const char c : text) pieces.emplace_back(1, c);
  const Streamed run = feed(m, pieces);
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "a</b></e");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST").emit, "");
  EXPECT_EQ(m.push("O").emit, "");
  EXPECT_EQ(m.push("X").emit, "STOX");
  EXPECT_EQ(m.push("S").emit, "");
  EXPECT_EQ(m.flush(), "S");  // the held tail at the end of the generation
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, EarliestOfSeveralStops) {
  StopStringMatcher a({"world", "lo w"});
  auto r = a.push("hello world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "hel");
  StopStringMatcher b({"\n\n", "User:", "###"});
  const Streamed run = feed(b, {"Sure", ".\n", "Us", "e", "r", ": hi"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "Sure.\n");
  // The longest held prefix over every stop: "\n" for "\n\n", "Us" for "User:".
  StopStringMatcher c({"\n\n", "User:"});
  EXPECT_EQ(c.push("ok\n").emit, "ok");
  EXPECT_EQ(c.push("Us").emit, "\n");
  EXPECT_EQ(c.flush(), "Us");
}

TEST(StopStrings, OverlappingPrefixes) {
  // "ababc": the held tail is "abc", the longest suffix that starts "abcd".
  StopStringMatcher m({"abcd"});
  EXPECT_EQ(m.push("ababc").emit, "ab");
  auto r = m.push("d");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  // A failed match inside a held tail can still start a new one.
  StopStringMatcher n({"abac"});
  EXPECT_EQ(n.push("aba").emit, "");
  r = n.push("bac!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "ab");
  StopStringMatcher o({"aab"});
  r = o.push("aaab");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "a");
}

TEST(StopStrings, ResetStartsOver) {
  StopStringMatcher m({"x"});
  EXPECT_TRUE(m.push("abx").stopped);
  m.reset();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("abc").emit, "abc");
  EXPECT_TRUE(m.push("x").stopped);
}

TEST(StopStrings, Utf8NeverSplitsACharacter) {
  // The stop "é!" shares its first character with the text: "é" is held
  // whole, both bytes.
  StopStringMatcher m({"\xC3\xA9!"});
  EXPECT_EQ(m.push("caf\xC3\xA9").emit, "caf");
  EXPECT_EQ(m.push("?").emit, "\xC3\xA9?");
  // "è" (C3 A8) shares only its lead byte with "é" (C3 A9): released.
  EXPECT_EQ(m.push("\xC3\xA8").emit, "\xC3\xA8");
  EXPECT_TRUE(m.push("\xC3\xA9!").stopped);

  // A piece that ends inside a character (a byte token) is held until the
  // character is complete, even with no stop string involved.
  StopStringMatcher n({"STOP"});
  EXPECT_EQ(n.push("ab\xE2\x82").emit, "ab");
  EXPECT_EQ(n.push("\xAC!").emit, "\xE2\x82\xAC!");  // "€!"
  EXPECT_EQ(n.push("\xF0\x9F").emit, "");
  EXPECT_EQ(n.push("\x98").emit, "");
  EXPECT_EQ(n.push("\x80S").emit, "\xF0\x9F\x98\x80");  // "😀", "S" held
  EXPECT_EQ(n.flush(), "S");

  // Multi-byte stop strings split across pieces inside their characters.
  StopStringMatcher o({"\xE3\x80\x82\xE3\x80\x82"});  // "。。"
  const Streamed run = feed(o, {"\xE6\x97", "\xA5\xE3", "\x80\x82\xE3", "\x80", "\x82", "x"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.text, "\xE6\x97\xA5");  // "日"
  for (const std::string& e : run.emits) EXPECT_TRUE(valid_utf8(e));
}

TEST(StopStrings, RandomStreamsMatchThePlainAnswer) {
  // Texts over a small alphabet of 1- to 4-byte characters, cut into pieces
  // at random byte offsets (so pieces split characters), one stop string.
  const std::vector<std::string> alphabet = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC",
                                             "\xF0\x9F\x98\x80"};
  SplitMix64 rng(2024);
  auto below = [&](size_t n) { return static_cast<size_t>(rng.next() % n); };
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text, stop;
    const size_t text_chars = 1 + below(30), stop_chars = 1 + below(4);
    for (size_t i = 0; i < text_chars; ++i) text += alphabet[below(alphabet.size())];
    for (size_t i = 0; i < stop_chars; ++i) stop += alphabet[below(alphabet.size())];
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t len = std::min(text.size() - at, 1 + below(6));
      pieces.push_back(text.substr(at, len));
      at += len;
    }
    StopStringMatcher m({stop});
    const Streamed run = feed(m, pieces);
    const size_t found = text.find(stop);
    ASSERT_EQ(run.stopped, found != std::string::npos) << text << " / " << stop;
    ASSERT_EQ(run.text, found == std::string::npos ? text : text.substr(0, found));
    for (const std::string& e : run.emits) ASSERT_TRUE(valid_utf8(e)) << text << " / " << stop;
  }
}

}  // namespace
}  // namespace cortiq
