// read_sum with 256-bit loads: four independent sums keep enough loads in
// flight for one core to reach its share of the memory bandwidth.
#include <immintrin.h>

#include "kernels/cpu/read_bandwidth.hpp"

namespace cortiq::kernels::avx2 {

uint64_t read_sum(const std::byte* p, size_t bytes) {
  __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    for (int k = 0; k < 4; ++k) {
      sum[k] = _mm256_add_epi64(
          sum[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * k)));
    }
  }
  const __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(sum[0], sum[1]), _mm256_add_epi64(sum[2], sum[3]));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace cortiq::kernels::avx2
