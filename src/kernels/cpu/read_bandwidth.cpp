#include "kernels/cpu/read_bandwidth.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "base/cpu_features.hpp"
#include "base/thread_pool.hpp"
#include "base/timer.hpp"

namespace cortiq::kernels {

namespace scalar {
uint64_t read_sum(const std::byte* p, size_t bytes) {
  uint64_t sum[4] = {};
  for (size_t i = 0; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * k, sizeof(v));
      sum[k] += v;
    }
  }
  return sum[0] + sum[1] + sum[2] + sum[3];
}
}  // namespace scalar

uint64_t read_sum(const std::byte* p, size_t bytes) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) return avx2::read_sum(p, bytes);
#endif
  return scalar::read_sum(p, bytes);
}

double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int passes) {
  const size_t n_threads = static_cast<size_t>(pool.size());
  // Whole 4 KiB pages per thread, so the slices share no line.
  const size_t slice = std::max<size_t>(buffer_bytes / n_threads / 4096, 1) * 4096;
  const auto buffer = std::make_unique<std::byte[]>(slice * n_threads);
  std::atomic<uint64_t> sink{0};
  double best = 0.0;
  for (int pass = -1; pass < passes; ++pass) {
    Timer timer;
    pool.run([&](int thread, int) {
      std::byte* mine = buffer.get() + static_cast<size_t>(thread) * slice;
      if (pass < 0) std::memset(mine, thread + 1, slice);  // first touch by its reader
      sink.fetch_add(read_sum(mine, slice), std::memory_order_relaxed);
    });
    const double seconds = timer.seconds();
    if (pass >= 0 && seconds > 0) {
      best = std::max(best, static_cast<double>(slice * n_threads) / seconds);
    }
  }
  return sink.load() == 1 ? 0.0 : best;  // (the sum is never 1; it must be used)
}

}  // namespace cortiq::kernels
