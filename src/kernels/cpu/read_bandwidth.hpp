// The machine's read bandwidth from memory, the limit of decode speed: every
// weight byte (and every cache row of the context) is read once per decoded
// token, so tokens/s x bytes per token over this figure says how close a
// decode is to the memory roofline (`cortiq bench` prints it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cortiq {
class ThreadPool;
}

namespace cortiq::kernels {

// Sums the 64-bit words of [p, p + bytes) (bytes a multiple of 128), a read
// the compiler cannot drop; dispatched to the widest loads the CPU has.
uint64_t read_sum(const std::byte* p, size_t bytes);

namespace scalar {
uint64_t read_sum(const std::byte* p, size_t bytes);
}
namespace avx2 {
uint64_t read_sum(const std::byte* p, size_t bytes);
}

// Bytes per second the pool's threads read together, each streaming its
// slice of a buffer of `buffer_bytes` (much larger than the caches): the
// best of `passes` timed passes after one warm-up.
double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{512} << 20,
                              int passes = 5);

}  // namespace cortiq::kernels
