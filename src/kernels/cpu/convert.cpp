#include "kernels/cpu/convert.hpp"

#include <cassert>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"

namespace cortiq::kernels {

namespace scalar {
void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}
void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}
void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}
}  // namespace scalar

// Picks the kernel of the active SIMD level; the x86 SIMD namespaces exist
// only in x86 builds.
#if defined(__x86_64__)
#define CORTIQ_DISPATCH(fn, ...)      \
  switch (simd_level()) {             \
    case SimdLevel::avx512:           \
      return avx512::fn(__VA_ARGS__); \
    case SimdLevel::avx2:             \
      return avx2::fn(__VA_ARGS__);   \
    default:                          \
      return scalar::fn(__VA_ARGS__); \
  }
#else
#define CORTIQ_DISPATCH(fn, ...) return scalar::fn(__VA_ARGS__);
#endif

void fp16_to_fp32_row(std::span<const uint16_t> src, std::span<float> dst) {
  assert(src.size() == dst.size());
  CORTIQ_DISPATCH(fp16_to_fp32_row, src.data(), dst.data(), static_cast<int64_t>(src.size()))
}
void fp32_to_fp16_row(std::span<const float> src, std::span<uint16_t> dst) {
  assert(src.size() == dst.size());
  CORTIQ_DISPATCH(fp32_to_fp16_row, src.data(), dst.data(), static_cast<int64_t>(src.size()))
}
void bf16_to_fp32_row(std::span<const uint16_t> src, std::span<float> dst) {
  assert(src.size() == dst.size());
  CORTIQ_DISPATCH(bf16_to_fp32_row, src.data(), dst.data(), static_cast<int64_t>(src.size()))
}
void fp32_to_bf16_row(std::span<const float> src, std::span<uint16_t> dst) {
  assert(src.size() == dst.size());
  CORTIQ_DISPATCH(fp32_to_bf16_row, src.data(), dst.data(), static_cast<int64_t>(src.size()))
}

}  // namespace cortiq::kernels
