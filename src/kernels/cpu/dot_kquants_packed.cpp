// The scalar kernels over the packed K layouts: each row's block is read
// back out of the group and put through the canonical sequence of
// dot_kquants.cpp (which they must match bit for bit), and the dispatch.
#include "kernels/cpu/dot_kquants_packed.hpp"

#include <array>
#include <cmath>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "quant/k_scales.hpp"

namespace cortiq::kernels {

namespace scalar {

namespace {

// Byte i of row r of a field interleaved `width` bytes at a time.
uint8_t field_byte(const std::byte* field, int r, int i, int width) {
  return static_cast<uint8_t>(field[kPackRows * width * (i / width) + width * r + i % width]);
}

uint16_t half_at(const std::byte* field, int r) {
  uint16_t h;
  std::memcpy(&h, field + 2 * r, sizeof(h));
  return h;
}

// q4_Kx8: d at 0, dmin at 16, scales at 32 (4 bytes at a time), qs at 128.
float q4_k_one(const std::byte* group, int r, const Q8BlockK* a, int64_t n_blocks) {
  constexpr size_t kBlock = 1152;
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + static_cast<size_t>(b) * kBlock;
    const Q8BlockK& x = a[b];
    std::array<uint8_t, 12> scales;
    for (int i = 0; i < 12; ++i) scales[i] = field_byte(block + 32, r, i, 4);
    int32_t isum = 0;
    int32_t imin = 0;
    for (int j = 0; j < 8; ++j) {
      const int c = j / 2;
      const int p = j % 2;
      const quant::ScaleAndMin sm = quant::k4_scale_and_min(j, scales);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = field_byte(block + 128, r, 32 * c + l, 4);
        const int q = p == 0 ? byte & 0xF : byte >> 4;
        dot += q * x.qs[32 * j + l];
      }
      isum += sm.scale * dot;
      imin += sm.min * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
    }
    const float dl = x.d * fp16_to_fp32(half_at(block, r));
    const float ml = x.d * fp16_to_fp32(half_at(block + 16, r));
    acc = std::fma(dl, static_cast<float>(isum), acc);
    acc = std::fma(-ml, static_cast<float>(imin), acc);
  }
  return acc;
}

// q6_Kx8: d at 0, scales at 16 (2 bytes at a time), ql at 144, qh at 1168.
float q6_k_one(const std::byte* group, int r, const Q8BlockK* a, int64_t n_blocks) {
  constexpr size_t kBlock = 1680;
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = group + static_cast<size_t>(b) * kBlock;
    const Q8BlockK& x = a[b];
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      const int h = g / 8;
      const int k = (g % 8) / 2;
      const int part = g % 2;
      int32_t dot = 0;
      for (int i = 0; i < 16; ++i) {
        const int l = 16 * part + i;
        const uint8_t low_byte = field_byte(block + 144, r, 64 * h + l + 32 * (k % 2), 4);
        const int low = k < 2 ? low_byte & 0xF : low_byte >> 4;
        const uint8_t high_byte = field_byte(block + 1168, r, 32 * h + l, 4);
        const int q = low | (((high_byte >> (2 * k)) & 3) << 4);
        dot += q * x.qs[16 * g + i];
      }
      const auto scale = static_cast<int8_t>(field_byte(block + 16, r, g, 2));
      isum += scale * (dot - 32 * x.bsums[g]);
    }
    acc = std::fma(x.d * fp16_to_fp32(half_at(block, r)), static_cast<float>(isum), acc);
  }
  return acc;
}

template <float (*One)(const std::byte*, int, const Q8BlockK*, int64_t)>
void group_kernel(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int n_act,
                  int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i) {
    for (int r = 0; r < kPackRows; ++r) {
      out[i * kPackRows + r] = One(group, r, a + i * a_stride, n_blocks);
    }
  }
}

}  // namespace

PackedKDot packed_kquant_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_Kx8:
      return group_kernel<q4_k_one>;
    case PackedLayout::q6_Kx8:
      return group_kernel<q6_k_one>;
    default:
      return nullptr;
  }
}

}  // namespace scalar

PackedKDot packed_kquant_dot(PackedLayout layout) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) {
    if (const PackedKDot kernel = avx2::packed_kquant_dot(layout)) return kernel;
  }
#endif
  return scalar::packed_kquant_dot(layout);
}

}  // namespace cortiq::kernels
