// Loop stop: worked examples of hold, release and loop confirmation, and a
// randomized check against a from-scratch recount after every push.
#include <algorithm>
#include <vector>

#include "base/error.hpp"
#include "base/random.hpp"
#include "runtime/loop_detector.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

struct Trace {
  std::vector<size_t> releases;  // per push
  size_t released = 0;
  bool loop = false;
  size_t keep = 0;
  size_t loop_at = 0;  // 1-based push that confirmed the loop
};

Trace feed(LoopDetector& d, const std::vector<TokenId>& tokens) {
  Trace t;
  for (const TokenId id : tokens) {
    const auto step = d.push(id);
    t.releases.push_back(step.release);
    t.released += step.release;
    if (step.loop) {
      t.loop = true;
      t.keep = step.keep;
      t.loop_at = t.releases.size();
      break;
    }
  }
  return t;
}

TEST(LoopDetector, RejectsBadParams) {
  EXPECT_THROW(LoopDetector({0, 4, 16}), Error);
  EXPECT_THROW(LoopDetector({8, 1, 16}), Error);
  EXPECT_NO_THROW(LoopDetector({1, 2, 0}));
}

TEST(LoopDetector, PeriodTwoLoopKeepsOneCopy) {
  LoopDetector d({4, 3, 6});
  const Trace t = feed(d, {1, 2, 3, 4, 5, 6, 5, 6, 5, 6});
  EXPECT_TRUE(t.loop);
  EXPECT_EQ(t.loop_at, 10u);
  EXPECT_EQ(t.keep, 6u);  // 1 2 3 4 5 6: "5 6" once
  // The first six are released as they come; the repeats are held.
  EXPECT_EQ(t.releases, (std::vector<size_t>{1, 1, 1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(t.released, t.keep);
  // After the loop nothing changes.
  const auto again = d.push(5);
  EXPECT_TRUE(again.loop);
  EXPECT_EQ(again.release, 0u);
  EXPECT_EQ(again.keep, 6u);
  EXPECT_EQ(d.flush(), 0u);
}

TEST(LoopDetector, BrokenRepetitionIsReleased) {
  LoopDetector d({4, 3, 6});
  const Trace t = feed(d, {1, 2, 3, 4, 5, 6, 5, 6, 7, 8});
  EXPECT_FALSE(t.loop);
  // "5 6" held at pushes 7 and 8, released with the 7 that breaks the run.
  EXPECT_EQ(t.releases, (std::vector<size_t>{1, 1, 1, 1, 1, 1, 0, 0, 3, 1}));
  EXPECT_EQ(d.flush(), 0u);
  // A run still going at the end is released by flush().
  LoopDetector e({4, 3, 6});
  const Trace u = feed(e, {1, 2, 3, 1, 2});
  EXPECT_EQ(u.released, 3u);
  EXPECT_EQ(e.flush(), 2u);
  EXPECT_EQ(e.flush(), 0u);
}

TEST(LoopDetector, PeriodOneRun) {
  LoopDetector d({4, 4, 4});
  const Trace t = feed(d, {9, 8, 7, 7, 7, 7, 7});
  EXPECT_TRUE(t.loop);
  EXPECT_EQ(t.loop_at, 6u);  // four 7s
  EXPECT_EQ(t.keep, 3u);     // 9 8 7
  EXPECT_EQ(t.releases, (std::vector<size_t>{1, 1, 1, 0, 0, 0}));

  // min_tokens: with min_repeats 2, a period-1 run needs five copies.
  LoopDetector e({4, 2, 5});
  const Trace u = feed(e, {3, 3, 3, 3, 3, 3});
  EXPECT_TRUE(u.loop);
  EXPECT_EQ(u.loop_at, 5u);
  EXPECT_EQ(u.keep, 1u);
}

TEST(LoopDetector, LongerBlocks) {
  // Period 3, two copies spanning 6 tokens.
  LoopDetector d({8, 2, 6});
  const Trace t = feed(d, {0, 1, 2, 3, 1, 2, 3});
  EXPECT_TRUE(t.loop);
  EXPECT_EQ(t.loop_at, 7u);
  EXPECT_EQ(t.keep, 4u);
  EXPECT_EQ(t.released, 4u);

  // A block with an inner repeat (period 4: 5 5 6 7): the short period-1
  // run inside is held and released, the block loop is found.
  LoopDetector e({4, 3, 8});
  const Trace u = feed(e, {1, 5, 5, 6, 7, 5, 5, 6, 7, 5, 5, 6, 7});
  EXPECT_TRUE(u.loop);
  EXPECT_EQ(u.loop_at, 13u);
  EXPECT_EQ(u.keep, 5u);         // 1 5 5 6 7
  EXPECT_EQ(u.releases[2], 0u);  // the second 5 waits ...
  EXPECT_EQ(u.releases[3], 2u);  // ... until 6 breaks its run

  // Periods beyond max_period are not loops; they are never held either.
  LoopDetector f({2, 2, 2});
  const Trace v = feed(f, {1, 2, 3, 1, 2, 3, 1, 2, 3});
  EXPECT_FALSE(v.loop);
  EXPECT_EQ(v.released, 9u);
}

TEST(LoopDetector, ResetStartsOver) {
  LoopDetector d({4, 2, 2});
  EXPECT_TRUE(feed(d, {1, 1}).loop);
  d.reset();
  const Trace t = feed(d, {1, 2, 1, 3});
  EXPECT_FALSE(t.loop);
  EXPECT_EQ(t.released, 4u);
}

// From scratch: the run of period p at the end of `tokens`.
size_t run_of(const std::vector<TokenId>& tokens, size_t p) {
  size_t run = 0;
  for (size_t i = tokens.size(); i > p && tokens[i - 1] == tokens[i - 1 - p]; --i) ++run;
  return run;
}

TEST(LoopDetector, ReleasedPlusHeldIsTotalOnRandomStreams) {
  SplitMix64 rng(77);
  auto below = [&](uint64_t n) { return static_cast<int32_t>(rng.next() % n); };
  int loops = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const LoopStopParams params{1 + below(6), 2 + below(3), below(12)};
    LoopDetector d(params);
    // A small alphabet and occasional copied blocks make repeats common.
    std::vector<TokenId> tokens;
    size_t released = 0;
    bool looped = false;
    for (int i = 0; i < 200 && !looped; ++i) {
      TokenId next = below(3);
      if (tokens.size() >= 4 && below(3) != 0) {
        const size_t p = 1 + static_cast<size_t>(below(4));
        if (p <= tokens.size()) next = tokens[tokens.size() - p];
      }
      tokens.push_back(next);
      const auto step = d.push(next);
      released += step.release;

      // Recount: the longest run and whether any period makes a loop.
      size_t held = 0, loop_run = 0;
      bool loop = false;
      for (size_t p = 1; p <= static_cast<size_t>(params.max_period); ++p) {
        const size_t run = run_of(tokens, p);
        held = std::max(held, run);
        const size_t copies = 1 + run / p;
        if (copies >= static_cast<size_t>(params.min_repeats) &&
            static_cast<int64_t>(copies * p) >= params.min_tokens) {
          loop = true;
          loop_run = std::max(loop_run, run);
        }
      }
      ASSERT_EQ(step.loop, loop) << "iteration " << iter << " push " << i;
      if (loop) {
        looped = true;
        ++loops;
        ASSERT_EQ(step.keep, tokens.size() - loop_run);
        ASSERT_EQ(released, step.keep);
      } else {
        ASSERT_EQ(released + held, tokens.size()) << "iteration " << iter << " push " << i;
      }
    }
    if (!looped) {
      ASSERT_EQ(released + d.flush(), tokens.size());
    }
  }
  EXPECT_GT(loops, 50);
}

}  // namespace
}  // namespace cortiq
