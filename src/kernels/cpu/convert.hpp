// Row conversions between f32 and the 16-bit float formats, dispatched to
// the best SIMD level at run time. All variants give bit-identical results
// (round-to-nearest-even, NaN kept), checked against the scalar reference.
#pragma once

#include <cstdint>
#include <span>

namespace cortiq::kernels {

// dst.size() must equal src.size().
void fp16_to_fp32_row(std::span<const uint16_t> src, std::span<float> dst);
void fp32_to_fp16_row(std::span<const float> src, std::span<uint16_t> dst);
void bf16_to_fp32_row(std::span<const uint16_t> src, std::span<float> dst);
void fp32_to_bf16_row(std::span<const float> src, std::span<uint16_t> dst);

// One namespace per SIMD level, each compiled with its own target flags.
// Only the dispatcher and the tests call these directly.
#define CORTIQ_DECLARE_CONVERT_KERNELS                               \
  void fp16_to_fp32_row(const uint16_t* src, float* dst, int64_t n); \
  void fp32_to_fp16_row(const float* src, uint16_t* dst, int64_t n); \
  void bf16_to_fp32_row(const uint16_t* src, float* dst, int64_t n); \
  void fp32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);
namespace scalar {
CORTIQ_DECLARE_CONVERT_KERNELS
}
namespace avx2 {
CORTIQ_DECLARE_CONVERT_KERNELS
}
namespace avx512 {
CORTIQ_DECLARE_CONVERT_KERNELS
}
#undef CORTIQ_DECLARE_CONVERT_KERNELS

}  // namespace cortiq::kernels
