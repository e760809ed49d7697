// The scalar kernels define the order of operations (dot_packed.hpp).
#include "kernels/cpu/dot_packed.hpp"

#include <array>
#include <cmath>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "kernels/cpu/dot_quants32.hpp"
#include "quant/blocks.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::kernels {

namespace scalar {

namespace {

float fp16_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return fp16_to_fp32(h);
}

// Code j (0..31) of a Q4_0 block's 16 code bytes, without the -8 offset.
int q4_nibble(const uint8_t* qs, int j) {
  return j < 16 ? qs[j] & 0x0F : qs[j - 16] >> 4;
}

// One block of the canonical order (dot_packed.hpp), from the block as the
// file stores it: the exact integer sum, then one FMA.
float q4_0_block(float acc, const std::byte* block, const Q8Block32& a) {
  const auto* qs = reinterpret_cast<const uint8_t*>(block + 2);
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += q4_nibble(qs, j) * a.qs[j];
  return std::fma(static_cast<float>(sum - 8 * a.sum), fp16_at(block) * a.d, acc);
}

float q8_0_block(float acc, const std::byte* block, const Q8Block32& a) {
  const auto* qs = reinterpret_cast<const int8_t*>(block + 2);
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += qs[j] * a.qs[j];
  return std::fma(static_cast<float>(sum), fp16_at(block) * a.d, acc);
}

// MXFP4, in dot_quants32.hpp's order: the codes through kMxfp4Values, the
// halved E8M0 scale.
float mxfp4_block(float acc, const std::byte* block, const Q8Block32& a) {
  const auto* qs = reinterpret_cast<const uint8_t*>(block + 1);
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) {
    sum += quant::kMxfp4Values[static_cast<size_t>(q4_nibble(qs, j))] * a.qs[j];
  }
  const float scale = quant::e8m0_to_fp32_half(std::to_integer<uint8_t>(block[0]));
  return std::fma(static_cast<float>(sum), scale * a.d, acc);
}

using BlockStep = float (*)(float acc, const std::byte* block, const Q8Block32& a);

template <BlockStep Step, size_t kBlockBytes>
void row_kernel(const std::byte* row, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
      acc = Step(acc, row + static_cast<size_t>(b) * kBlockBytes, a[i * a_stride + b]);
    }
    out[i] = acc;
  }
}

// Packed groups: each row's block put back into the file's layout and
// taken through the same step, so the packed order is the row order by
// construction.
template <BlockStep Step, PackedLayout kLayout>
void group_kernel(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                  int64_t n_blocks, float* out) {
  const size_t group_block = packed_block_bytes(kLayout);
  std::array<std::byte, 34> block;  // the larger file block (Q8_0)
  for (int i = 0; i < n_act; ++i) {
    for (int r = 0; r < kPackRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        unpack_block(kLayout, group + static_cast<size_t>(b) * group_block, r, block.data());
        acc = Step(acc, block.data(), a[i * a_stride + b]);
      }
      out[i * kPackRows + r] = acc;
    }
  }
}

}  // namespace

PackedDot packed_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return group_kernel<q4_0_block, PackedLayout::q4_0x8>;
    case PackedLayout::q8_0x8:
      return group_kernel<q8_0_block, PackedLayout::q8_0x8>;
    case PackedLayout::mxfp4x8:
      return group_kernel<mxfp4_block, PackedLayout::mxfp4x8>;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

RowDot row_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return row_kernel<q4_0_block, 18>;
    case GgmlType::Q8_0:
      return row_kernel<q8_0_block, 34>;
    default:  // Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, or none
      return quants32_row_dot(type);
  }
}

}  // namespace scalar

PackedDot packed_dot(PackedLayout layout) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx512) return avx512::packed_dot(layout);
  if (simd_level() >= SimdLevel::avx2) {
    if (const PackedDot kernel = avx2::packed_dot(layout)) return kernel;
  }
#endif
  return scalar::packed_dot(layout);
}

PackedDot packed_dot_pair(PackedLayout layout) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx512) return avx512::packed_dot_pair(layout);
#endif
  (void)layout;
  return nullptr;
}

RowDot row_dot(GgmlType type) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) {
    if (const RowDot kernel = avx2::quants32_row_dot(type)) return kernel;
  }
#endif
  return scalar::row_dot(type);
}

int packed_dot_max_rows(PackedLayout layout) {
  return layout == PackedLayout::q4_0x8 || layout == PackedLayout::mxfp4x8 ? kMaxPackedRows : 4;
}

}  // namespace cortiq::kernels
