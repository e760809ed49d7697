// How the matmul paths cut a call's work (work_items.hpp): the slices tile
// [0, total) exactly, in order, for any thread count; decode slices shrink
// towards the end of the call, prefill slices are equal.
#include <gtest/gtest.h>

#include "kernels/cpu/work_items.hpp"

namespace cortiq::kernels {
namespace {

void expect_tiles_exactly(const Slices& s, int64_t total) {
  ASSERT_GT(s.count, 0);
  ASSERT_LE(s.count, Slices::kMax);
  for (int64_t i = 0; i < s.count; ++i) EXPECT_LE(s.begin(i), s.end(i)) << "slice " << i;
  EXPECT_EQ(s.begin(0), 0);
  EXPECT_EQ(s.end(s.count - 1), total);
}

TEST(WorkSlices, DecodeSlicesTileTheCallAndShrink) {
  // 16 MiB of weights in 4096 rows: slices halve the work left each round
  // down to ~64 KiB, then one last equal round.
  for (int64_t threads : {1, 2, 3, 8, 64, 128}) {
    const Slices s = call_slices(1, 4096, 4096, 16 << 20, threads);
    expect_tiles_exactly(s, 4096);
    EXPECT_LE(s.end(0) - s.begin(0), 4096 / (2 * threads)) << threads << " threads";
    EXPECT_LT(s.end(s.count - 1) - s.begin(s.count - 1), s.end(0) - s.begin(0) + 1);
  }
  // Rounds of `threads` slices, each no longer than the one before.
  const Slices s = call_slices(1, 1 << 20, 1 << 20, 64 << 20, 4);
  expect_tiles_exactly(s, 1 << 20);
  EXPECT_GT(s.count, 4 * 4);
  for (int64_t i = 1; i + 4 < s.count; ++i) {
    EXPECT_LE(s.end(i) - s.begin(i), s.end(i - 1) - s.begin(i - 1) + 1) << "slice " << i;
  }
}

TEST(WorkSlices, SmallCallsAndManyThreadsStillTile) {
  for (int64_t total : {1, 3, 17, 1000}) {
    for (int64_t threads : {1, 2, 7, 200}) {
      expect_tiles_exactly(call_slices(1, total, total, total * 64, threads), total);
      expect_tiles_exactly(call_slices(3, total, total, total * 64, threads), total);
    }
  }
}

TEST(WorkSlices, PrefillSlicesAreEqualAndBoundedByUnits) {
  const Slices s = call_slices(4, 8000, 2000, 8 << 20, 2);
  EXPECT_EQ(s.count, kSlicesPerThread * 2);
  expect_tiles_exactly(s, 8000);
  for (int64_t i = 0; i < s.count; ++i) EXPECT_EQ(s.end(i) - s.begin(i), 8000 / s.count);
  EXPECT_EQ(call_slices(4, 8000, 5, 8 << 20, 2).count, 5);  // never more slices than units
  EXPECT_EQ(call_slices(4, 1 << 20, 1 << 20, 1 << 30, 100).count, Slices::kMax);
}

}  // namespace
}  // namespace cortiq::kernels
