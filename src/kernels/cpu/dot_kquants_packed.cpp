// The scalar kernels over the packed K layouts: each row's block is put back
// together and taken through the step of dot_kquants.cpp, so they match the
// per-row kernels bit for bit by construction; and the dispatch.
#include "kernels/cpu/dot_kquants_packed.hpp"

#include <array>

#include "base/cpu_features.hpp"
#include "kernels/cpu/dot_kquants.hpp"

namespace cortiq::kernels {

namespace scalar {

namespace {

// Row r of the group: each super-block put back into the file's layout and
// taken through the per-row kernels' step, so the packed order is theirs by
// construction.
template <PackedLayout kLayout, GgmlType kType>
float one_row(const std::byte* group, int r, const Q8BlockK* a, int64_t n_blocks) {
  const KQuantBlockStep step = kquant_block_step(kType);
  const size_t group_block = packed_block_bytes(kLayout);
  std::array<std::byte, 256> block;  // the largest K block is 210 bytes
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    unpack_block(kLayout, group + static_cast<size_t>(b) * group_block, r, block.data());
    acc = step(acc, block.data(), a[b]);
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
      return group_kernel<one_row<PackedLayout::q4_Kx8, GgmlType::Q4_K>>;
    case PackedLayout::q6_Kx8:
      return group_kernel<one_row<PackedLayout::q6_Kx8, GgmlType::Q6_K>>;
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

PackedKDot packed_kquant_dot_pair(PackedLayout layout) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx512) return avx512::packed_kquant_dot_pair(layout);
#endif
  (void)layout;
  return nullptr;
}

}  // namespace cortiq::kernels
