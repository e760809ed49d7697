#include "base/thread_pool.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

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

// A claim word: the job's number (24 bits), then how many of the owner's
// slots are taken (20) and how many it has (20). The job number tells a
// finished job's word from the next one's, wrapping after 16 M jobs.
constexpr int kCountBits = 20;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kSeqMask = (uint64_t{1} << (64 - 2 * kCountBits)) - 1;

uint64_t claim_word(uint64_t seq, uint64_t taken, uint64_t count) {
  return (seq & kSeqMask) << (2 * kCountBits) | taken << kCountBits | count;
}
uint64_t taken_of(uint64_t word) {
  return word >> kCountBits & kCountMask;
}
uint64_t count_of(uint64_t word) {
  return word & kCountMask;
}

// Set while this thread runs a pool job: a nested fork/join from inside a
// job would wait on itself (a worker) or re-lock the dispatch mutex (the
// caller), so it is refused instead.
thread_local bool t_inside_job = false;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  // With more threads than cores a spinning thread only steals the core of
  // the one it waits for: give the CPU away almost at once instead.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spin_limit_ = n_threads <= cores ? kSpinIterations : 16;
  claims_ = std::vector<ClaimWord>(static_cast<size_t>(n_threads));
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

int64_t ThreadPool::grain_count(int64_t n, int64_t grain) {
  grain = std::max<int64_t>(grain, 1);
  return (n + grain - 1) / grain;
}

ThreadPool::Range ThreadPool::split_range(int64_t n, int64_t grain, int part, int n_parts) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_grains = grain_count(n, grain);
  const int64_t per = n_grains / n_parts;
  const int64_t extra = n_grains % n_parts;
  // The first `extra` parts take one grain more.
  const int64_t first = part * per + std::min<int64_t>(part, extra);
  const int64_t count = per + (part < extra ? 1 : 0);
  return {std::min(first * grain, n), std::min((first + count) * grain, n)};
}

int64_t ThreadPool::chunk_count(int64_t n, int64_t grain) const {
  return std::min(grain_count(n, grain), n_threads_ * kChunksPerThread);
}

// Runs the slots of `owner` that are left, one claim at a time. A claim is a compare-exchange on
// the owner's word, so it succeeds only while the job is still the one running; after it, job_ and
// job_ctx_ are the claimed job's, and stay so until the slot is counted done.
void ThreadPool::claim_from(int owner, int worker) noexcept {
  std::atomic<uint64_t>& word = claims_[static_cast<size_t>(owner)].word;
  uint64_t claims = word.load(std::memory_order_acquire);
  int64_t ran = 0;
  while (taken_of(claims) < count_of(claims)) {
    if (!word.compare_exchange_weak(claims, claims + (uint64_t{1} << kCountBits),
                                    std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;
    }
    const auto slot = static_cast<int64_t>(taken_of(claims)) * n_threads_ + owner;
    t_inside_job = true;
    try {
      job_(job_ctx_, slot, worker);
    } catch (...) {
      if (!has_error_.exchange(true)) error_ = std::current_exception();
    }
    t_inside_job = false;
    ++ran;
    claims = word.load(std::memory_order_acquire);
  }
  // Counted once the thread has finished with this owner's slots: the
  // caller waits for the total, and fewer shared writes cost less.
  if (ran > 0) done_.fetch_add(ran, std::memory_order_acq_rel);
}

// Its own slots first, then those left to the others.
void ThreadPool::claim_slots(int worker) noexcept {
  claim_from(worker, worker);
  for (int i = 1; i < n_threads_; ++i) claim_from((worker + i) % n_threads_, worker);
}

void ThreadPool::dispatch(Job job, void* ctx, int64_t n_slots) {
  if (t_inside_job) {
    throw std::logic_error("ThreadPool: a fork/join called from inside a pool job");
  }
  if ((n_slots + n_threads_ - 1) / n_threads_ > static_cast<int64_t>(kCountMask)) {
    throw std::logic_error("ThreadPool: " + std::to_string(n_slots) + " slots in one job");
  }
  std::lock_guard lock(dispatch_mutex_);
  job_ = job;
  job_ctx_ = ctx;
  error_ = nullptr;
  has_error_.store(false, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  ++job_seq_;
  for (int t = 0; t < n_threads_; ++t) {  // publishes the job
    const auto count = static_cast<uint64_t>(n_slots > t ? (n_slots - t - 1) / n_threads_ + 1 : 0);
    claims_[static_cast<size_t>(t)].word.store(claim_word(job_seq_, 0, count),
                                               std::memory_order_release);
  }
  if (n_threads_ > 1 && n_slots > 1) {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) epoch_.notify_all();
  }
  claim_slots(0);
  int spins = 0;
  while (done_.load(std::memory_order_acquire) != n_slots) {
    if (++spins < spin_limit_) {
      cpu_relax();
    } else {
      std::this_thread::yield();
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
    claim_slots(index);
  }
}

}  // namespace cortiq
