// How the matmul paths share a call's work between threads: the activation
// rows go in passes and the weight rows in slices of equal work, and each
// (pass, slice) item goes to whichever thread asks next (one atomic
// counter). A static split left one core idle at the end of most calls, as
// the cores' memory bandwidth differs from call to call; which thread
// computes an item never changes its bits.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/thread_pool.hpp"

namespace cortiq::kernels {

// fn(thread, pass, slice) for every pass < n_passes and slice < n_slices,
// on the pool's threads.
template <class Fn>
void run_work_items(ThreadPool& pool, int64_t n_passes, int64_t n_slices, Fn&& fn) {
  std::atomic<int64_t> next{0};
  pool.run([&](int thread, int) {
    for (int64_t item = next.fetch_add(1, std::memory_order_relaxed); item < n_passes * n_slices;
         item = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(thread, item / n_slices, item % n_slices);
    }
  });
}

}  // namespace cortiq::kernels
