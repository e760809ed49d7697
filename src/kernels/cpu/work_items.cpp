// The slicing of work_items.hpp.
#include "kernels/cpu/work_items.hpp"

#include <algorithm>

namespace cortiq::kernels {

namespace {

// The smallest decode slice: below this a slice's stream is mostly ramp-up.
constexpr int64_t kMinDecodeSliceBytes = 64 << 10;

Slices shrinking_slices(int64_t total, int64_t total_bytes, int64_t threads) {
  Slices s;
  const int64_t min_work =
      std::max<int64_t>(1, total * kMinDecodeSliceBytes / std::max<int64_t>(total_bytes, 1));
  int64_t at = 0;
  while (s.count + 2 * threads <= Slices::kMax) {
    const int64_t slice = (total - at) / (2 * threads);
    if (slice < min_work) break;
    for (int64_t t = 0; t < threads; ++t) s.ends[static_cast<size_t>(s.count++)] = (at += slice);
  }
  const int64_t rest = total - at;
  for (int64_t t = 1; t <= threads; ++t) {
    s.ends[static_cast<size_t>(s.count++)] = at + rest * t / threads;
  }
  return s;
}

Slices equal_slices(int64_t total, int64_t n) {
  Slices s;
  s.count = n;
  for (int64_t i = 0; i < n; ++i) s.ends[static_cast<size_t>(i)] = total * (i + 1) / n;
  return s;
}

}  // namespace

Slices call_slices(int64_t n_passes, int64_t total, int64_t total_units, int64_t total_bytes,
                   int64_t threads) {
  if (n_passes == 1 && 4 * threads <= Slices::kMax) {
    return shrinking_slices(total, total_bytes, threads);
  }
  return equal_slices(total, std::min({total_units, kSlicesPerThread * threads, Slices::kMax}));
}

}  // namespace cortiq::kernels
