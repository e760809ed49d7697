// Fork/join cost of the thread pool: an empty job on every thread. This is
// the floor under every parallel kernel, so it must stay in microseconds.
#include <benchmark/benchmark.h>

#include <atomic>

#include "base/thread_pool.hpp"

namespace {

void BM_ForkJoinEmpty(benchmark::State& state) {
  cortiq::ThreadPool pool(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    pool.run([](int, int) {});
  }
  state.counters["threads"] = static_cast<double>(pool.size());
}
BENCHMARK(BM_ForkJoinEmpty)->Arg(1)->Arg(2)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same with a small parallel_for body, as a decode-step kernel would be.
void BM_ParallelForSmall(benchmark::State& state) {
  cortiq::ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.parallel_for(1024, [&](int64_t begin, int64_t end) {
      int64_t s = 0;
      for (int64_t i = begin; i < end; ++i) s += i;
      sink.fetch_add(s, std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelForSmall)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
