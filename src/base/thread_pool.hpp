// A persistent pool of worker threads with a cheap fork/join.
//
// Every kernel runs on it, so dispatch must cost microseconds: workers spin
// briefly on an epoch counter before they sleep on a futex, the caller takes
// part, and no call allocates.
//
// A call's work comes in slots. Thread t's own slots are t, t + n, t + 2n,
// ... (n threads), which it runs in order; a thread that has run out takes
// the next slot of another. So an idle machine runs each slot on the same
// thread call after call (its caches stay warm, and run() gives thread t
// index t), while a thread the OS has not scheduled (another process busy
// on its core) neither holds its share hostage nor is waited for: the
// caller waits for the slots to be done, not for the threads to arrive.
// What a slot computes never depends on the thread that runs it, so the
// results are the same bits however the slots go.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
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

  // Calls fn(slot, n_slots) once for every slot in [0, n_slots) and returns
  // when all have finished; `worker` in fn(slot, worker) form is the index
  // (< size()) of the thread running the slot, unique among the threads at
  // work, for per-thread scratch. An exception thrown by fn is rethrown
  // here. Calling any of these from inside a job throws std::logic_error.
  template <class Fn>
  void run_slots(int64_t n_slots, Fn&& fn) {
    if (n_slots <= 0) return;
    dispatch([](void* ctx, int64_t slot,
                int worker) { (*static_cast<std::remove_reference_t<Fn>*>(ctx))(slot, worker); },
             &fn, n_slots);
  }

  // fn(thread, n_threads) once for each thread index: slots numbered like
  // the threads, so that a job may split its work by index (split_range)
  // and use per-index scratch. A stalled thread's index is run by another.
  template <class Fn>
  void run(Fn&& fn) {
    const int n = n_threads_;
    run_slots(n, [&](int64_t slot, int) { fn(static_cast<int>(slot), n); });
  }

  // Cuts [0, n) into contiguous chunks (multiples of `grain` except the
  // last), a few per thread, and calls fn(begin, end) for each.
  template <class Fn>
  void parallel_for(int64_t n, Fn&& fn, int64_t grain = 1) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n);
      return;
    }
    const int64_t n_chunks = chunk_count(n, grain);
    run_slots(n_chunks, [&](int64_t chunk, int) {
      const Range r = split_range(n, grain, static_cast<int>(chunk), static_cast<int>(n_chunks));
      if (r.begin < r.end) fn(r.begin, r.end);
    });
  }

  struct Range {
    int64_t begin;
    int64_t end;
  };
  // The range of part `part` of `n_parts` over [0, n) in steps of grain.
  static Range split_range(int64_t n, int64_t grain, int part, int n_parts);

  // Chunks per thread in parallel_for: enough that a stalled thread's
  // share is a small part of the call, few enough to cost nothing.
  static constexpr int64_t kChunksPerThread = 4;

 private:
  using Job = void (*)(void* ctx, int64_t slot, int worker);

  static int64_t grain_count(int64_t n, int64_t grain);  // grains of [0, n), the last short
  int64_t chunk_count(int64_t n, int64_t grain) const;
  void dispatch(Job job, void* ctx, int64_t n_slots);
  void claim_slots(int worker) noexcept;
  void claim_from(int owner, int worker) noexcept;
  void worker_main(int index);
  void stop_workers() noexcept;

  int n_threads_;
  int spin_limit_;  // pause iterations before yielding or sleeping
  std::vector<std::thread> workers_;
  std::mutex dispatch_mutex_;  // one fork/join at a time
  uint64_t job_seq_ = 0;       // the caller's count of jobs, under the mutex

  // Written by the caller before a job's claim words, read by a thread only
  // after it has claimed one of that job's slots: the caller cannot start
  // the next job before that slot is done.
  Job job_ = nullptr;
  void* job_ctx_ = nullptr;
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};

  // One claim word per thread, on its own cache line: the job's number and
  // how many of the thread's own slots are taken and exist. One word, so a
  // thread that wakes late for a finished job cannot claim a slot of the
  // next one by mistake.
  struct alignas(64) ClaimWord {
    std::atomic<uint64_t> word{0};
  };
  std::vector<ClaimWord> claims_;
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // bumped to wake the workers
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace cortiq
