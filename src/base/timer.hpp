// Wall-clock timing with a monotonic clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace cortiq {

class Timer {
 public:
  Timer() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double milliseconds() const { return seconds() * 1e3; }
  int64_t nanoseconds() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace cortiq
