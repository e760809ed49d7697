// A persistent pool of worker threads with a cheap fork/join.
//
// Every kernel runs on it, so dispatch must cost microseconds: workers spin
// briefly on an epoch counter before they sleep on a futex, the caller takes
// part as thread 0, and no call allocates. Work is split statically into
// contiguous ranges, so a given (n, threads) always gives the same split.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cortiq {

class ThreadPool {
 public:
  // n_threads counts the caller; 0 means one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread and returns when
  // all have finished. An exception thrown by fn is rethrown here. Calling
  // run() or parallel_for() from inside a job throws std::logic_error.
  template <class Fn>
  void run(Fn&& fn) {
    dispatch([](void* ctx, int thread,
                int n) { (*static_cast<std::remove_reference_t<Fn>*>(ctx))(thread, n); },
             &fn);
  }

  // Splits [0, n) into one contiguous range per thread (ranges are multiples
  // of `grain` except the last) and calls fn(begin, end) for each non-empty one.
  template <class Fn>
  void parallel_for(int64_t n, Fn&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int thread, int n_threads) {
      const Range r = split_range(n, grain, thread, n_threads);
      if (r.begin < r.end) fn(r.begin, r.end);
    });
  }

  struct Range {
    int64_t begin;
    int64_t end;
  };
  // The range of thread `thread` of `n_threads` over [0, n) in steps of grain.
  static Range split_range(int64_t n, int64_t grain, int thread, int n_threads);

 private:
  using Job = void (*)(void* ctx, int thread, int n_threads);

  void dispatch(Job job, void* ctx);
  void worker_main(int index);
  void stop_workers() noexcept;
  void run_job(int index) noexcept;

  int n_threads_;
  int spin_limit_;  // pause iterations before yielding or sleeping
  std::vector<std::thread> workers_;
  std::mutex dispatch_mutex_;  // one fork/join at a time

  // Written by the caller before the epoch is bumped, read by workers after.
  Job job_ = nullptr;
  void* job_ctx_ = nullptr;
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};

  alignas(64) std::atomic<uint32_t> epoch_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace cortiq
