#include "base/thread_pool.hpp"

#include <algorithm>
#include <stdexcept>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cortiq {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// About 50-200 us of spinning before a worker sleeps: long enough to catch
// the next kernel of a forward pass, short enough not to burn an idle core.
constexpr int kSpinIterations = 1 << 14;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  // With more threads than cores a spinning thread only steals the core of
  // the one it waits for: give the CPU away almost at once instead.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spin_limit_ = n_threads <= cores ? kSpinIterations : 16;
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  try {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
  } catch (...) {
    // No destructor runs for a constructor that throws: the workers already
    // started must be joined here, or ~thread calls std::terminate.
    stop_workers();
    throw;
  }
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

void ThreadPool::stop_workers() noexcept {
  stop_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  epoch_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool::Range ThreadPool::split_range(int64_t n, int64_t grain, int thread, int n_threads) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t per = n_grains / n_threads;
  const int64_t extra = n_grains % n_threads;
  // The first `extra` threads take one grain more.
  const int64_t first = thread * per + std::min<int64_t>(thread, extra);
  const int64_t count = per + (thread < extra ? 1 : 0);
  return {std::min(first * grain, n), std::min((first + count) * grain, n)};
}

namespace {
// Set while this thread runs a pool job: a nested fork/join from inside a
// job would wait on itself (a worker) or re-lock the dispatch mutex (the
// caller), so it is refused instead.
thread_local bool t_inside_job = false;
}  // namespace

void ThreadPool::run_job(int index) noexcept {
  t_inside_job = true;
  try {
    job_(job_ctx_, index, n_threads_);
  } catch (...) {
    if (!has_error_.exchange(true)) error_ = std::current_exception();
  }
  t_inside_job = false;
}

void ThreadPool::dispatch(Job job, void* ctx) {
  if (t_inside_job) {
    throw std::logic_error("ThreadPool: run()/parallel_for() called from inside a pool job");
  }
  std::lock_guard lock(dispatch_mutex_);
  job_ = job;
  job_ctx_ = ctx;
  error_ = nullptr;
  has_error_.store(false, std::memory_order_relaxed);
  if (n_threads_ > 1) {
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_seq_cst);  // publishes job_ to the workers
    if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();
  }
  run_job(0);
  if (n_threads_ > 1) {
    int spins = 0;
    while (pending_.load(std::memory_order_acquire) != 0) {
      if (++spins < spin_limit_) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
  if (has_error_.load(std::memory_order_relaxed)) std::rethrow_exception(error_);
}

void ThreadPool::worker_main(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t epoch = epoch_.load(std::memory_order_acquire);
    for (int spins = 0; epoch == seen && spins < spin_limit_; ++spins) {
      cpu_relax();
      epoch = epoch_.load(std::memory_order_acquire);
    }
    while (epoch == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      epoch_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      epoch = epoch_.load(std::memory_order_acquire);
    }
    seen = epoch;
    if (stop_.load(std::memory_order_acquire)) return;
    run_job(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace cortiq
