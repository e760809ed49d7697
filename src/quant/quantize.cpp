// quantize_row: argument checks, the plain float encodings, and dispatch to
// the block quantizers (quantize_legacy.cpp, quantize_k.cpp,
// quantize_nonlinear.cpp).
#include <cstring>

#include "base/fp16.hpp"
#include "quant/quantize.hpp"
#include "quant/quantizers.hpp"
#include "quant/row_checks.hpp"

namespace cortiq {
namespace {

template <typename Convert>
void encode_halves(std::span<const float> src, std::span<std::byte> dst, Convert convert) {
  for (size_t i = 0; i < src.size(); ++i) {
    const uint16_t half = convert(src[i]);
    std::memcpy(dst.data() + 2 * i, &half, sizeof(half));
  }
}

}  // namespace

void quantize_row(GgmlType type, std::span<const float> src, std::span<std::byte> dst) {
  quant::check_row("quantize_row", type, can_quantize(type), src.size(), dst.size());
  switch (type) {
    case GgmlType::F32:
      if (!src.empty()) std::memcpy(dst.data(), src.data(), dst.size());
      return;
    case GgmlType::F16:
      return encode_halves(src, dst, fp32_to_fp16);
    case GgmlType::BF16:
      return encode_halves(src, dst, fp32_to_bf16);
    case GgmlType::Q4_0:
      return quant::quantize_q4_0(src, dst);
    case GgmlType::Q4_1:
      return quant::quantize_q4_1(src, dst);
    case GgmlType::Q5_0:
      return quant::quantize_q5_0(src, dst);
    case GgmlType::Q5_1:
      return quant::quantize_q5_1(src, dst);
    case GgmlType::Q8_0:
      return quant::quantize_q8_0(src, dst);
    case GgmlType::Q2_K:
      return quant::quantize_q2_k(src, dst);
    case GgmlType::Q3_K:
      return quant::quantize_q3_k(src, dst);
    case GgmlType::Q4_K:
      return quant::quantize_q4_k(src, dst);
    case GgmlType::Q5_K:
      return quant::quantize_q5_k(src, dst);
    case GgmlType::Q6_K:
      return quant::quantize_q6_k(src, dst);
    case GgmlType::IQ4_NL:
      return quant::quantize_iq4_nl(src, dst);
    case GgmlType::MXFP4:
      return quant::quantize_mxfp4(src, dst);
    default:
      break;
  }
  // can_quantize() and this switch disagree: a defect, not bad input.
  throw Error("quantize_row: no encoder for type " + std::string(ggml_type_name(type)));
}

}  // namespace cortiq
