#include <atomic>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "base/thread_pool.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

TEST(ThreadPool, SplitCoversRangeExactlyOnce) {
  for (int threads = 1; threads <= 7; ++threads) {
    for (int64_t n : {0, 1, 5, 64, 100, 1001}) {
      for (int64_t grain : {1, 4, 32}) {
        int64_t expected_begin = 0;
        for (int t = 0; t < threads; ++t) {
          const auto r = ThreadPool::split_range(n, grain, t, threads);
          EXPECT_EQ(r.begin, expected_begin);
          EXPECT_LE(r.begin, r.end);
          if (r.end < n) {
            EXPECT_EQ(r.end % grain, 0);
          }
          expected_begin = r.end;
        }
        EXPECT_EQ(expected_begin, n);
      }
    }
  }
}

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int round = 0; round < 200; ++round) {
      const int64_t n = 1 + round * 37 % 1000;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1);
    }
  }
}

TEST(ThreadPool, RunUsesEveryThread) {
  ThreadPool pool(4);
  std::vector<int> seen(4, 0);
  for (int round = 0; round < 1000; ++round) {
    pool.run([&](int thread, int n) {
      ASSERT_EQ(n, 4);
      seen[static_cast<size_t>(thread)]++;
    });
  }
  for (int count : seen) EXPECT_EQ(count, 1000);
}

TEST(ThreadPool, RethrowsWorkerExceptionAndStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.run([](int thread, int) {
    if (thread == 2) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.run([&](int, int) { count++; });
  EXPECT_EQ(count.load(), 3);
}

TEST(ThreadPool, SurvivesIdleSleepAndWakes) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  for (int i = 0; i < 3; ++i) {
    pool.run([&](int, int) { count++; });
    // Long enough for the workers to stop spinning and sleep on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_EQ(count.load(), 6);
}

// When a worker cannot be started the constructor throws; the workers
// already running must be stopped and joined first, or their std::thread
// destructors call std::terminate.
TEST(ThreadPool, ConstructorThatCannotStartAllThreadsThrowsCleanly) {
  if (test::kAddressSanitizer) GTEST_SKIP() << "needs an address-space limit";
  EXPECT_EXIT(
      {
        // Each thread stack takes megabytes of address space: a few fit.
        test::limit_address_space(uint64_t{24} << 20);
        try {
          ThreadPool pool(256);
        } catch (const std::system_error&) {
          std::_Exit(0);
        }
        std::_Exit(2);  // all started: the limit did not bite
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(ThreadPool, NestedCallFromAJobIsRefusedNotDeadlocked) {
  ThreadPool pool(2);
  std::atomic<int> refused{0};
  pool.run([&](int, int) {
    try {
      pool.run([](int, int) {});
    } catch (const std::logic_error&) {
      refused++;
    }
  });
  EXPECT_EQ(refused.load(), 2) << "both the caller's share and the worker's are refused";
  std::atomic<int> count{0};
  pool.run([&](int, int) { count++; });
  EXPECT_EQ(count.load(), 2) << "the pool stays usable";
}

}  // namespace
}  // namespace cortiq
