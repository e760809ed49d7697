// How the matmul paths share a call's work between threads: the activation
// rows go in passes and the weight rows in slices (call_slices), and each
// (pass, slice) item goes to whichever thread asks next (a slot of the
// pool). A static split left one core idle at the end of most calls, as
// the cores' memory bandwidth differs from call to call; which thread
// computes an item never changes its bits.
#pragma once

#include <array>
#include <cstdint>

#include "base/thread_pool.hpp"

namespace cortiq::kernels {

// Where a call's slices end, in units of work (the caller's: rows, rows x
// blocks) from the start of its first matrix. kMax holds the equal slices
// of 64 threads (beyond that, prefill gets fewer than kSlicesPerThread
// each) and the shrinking ones of 128.
struct Slices {
  static constexpr int64_t kMax = 512;
  std::array<int64_t, kMax> ends{};
  int64_t count = 0;
  int64_t begin(int64_t slice) const {
    return slice == 0 ? 0 : ends[static_cast<size_t>(slice - 1)];
  }
  int64_t end(int64_t slice) const { return ends[static_cast<size_t>(slice)]; }
};

// Equal slices per thread when the activation rows take several passes
// (prefill): every (pass, slice) item is then about as long.
constexpr int64_t kSlicesPerThread = 8;

// How a call of `total` work in `total_units` indivisible units (whose
// weights take total_bytes) is cut for `threads` threads: shrinking slices
// when the activation rows take one pass (decode: each round gives every
// thread a slice of half the work left, down to ~64 KiB of weights, so a
// thread reads a few long streams while the last slices, the ones the
// others wait for at the end of the call, are short; 32 equal slices per
// thread measured slower than 8, as every slice restarts a stream), else
// kSlicesPerThread equal slices per thread.
Slices call_slices(int64_t n_passes, int64_t total, int64_t total_units, int64_t total_bytes,
                   int64_t threads);

// fn(thread, pass, slice) for every pass < n_passes and slice < n_slices,
// each (pass, slice) a slot of the pool: `thread` is the index of the
// thread running it, for per-thread scratch.
template <class Fn>
void run_work_items(ThreadPool& pool, int64_t n_passes, int64_t n_slices, Fn&& fn) {
  pool.run_slots(n_passes * n_slices,
                 [&](int64_t item, int thread) { fn(thread, item / n_slices, item % n_slices); });
}

}  // namespace cortiq::kernels
