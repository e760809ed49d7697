#include "kernels/cpu/dequantize_fast.hpp"

#include "base/cpu_features.hpp"
#include "base/error.hpp"
#include "kernels/cpu/convert.hpp"
#include "quant/quantize.hpp"

namespace cortiq::kernels {

void dequantize_row_fast(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  const auto expected = ggml_row_bytes(type, dst.size());
  if (!expected || *expected != src.size()) {
    return dequantize_row(type, src, dst);  // the reference names the problem
  }
  switch (type) {
    case GgmlType::F16:
      return fp16_to_fp32_row({reinterpret_cast<const uint16_t*>(src.data()), dst.size()}, dst);
    case GgmlType::BF16:
      return bf16_to_fp32_row({reinterpret_cast<const uint16_t*>(src.data()), dst.size()}, dst);
    default:
      break;
  }
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2 &&
      avx2::dequantize_row(type, src.data(), dst.data(), static_cast<int64_t>(dst.size()))) {
    return;
  }
#endif
  dequantize_row(type, src, dst);
}

}  // namespace cortiq::kernels
