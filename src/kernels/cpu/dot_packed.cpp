// The scalar kernels define the order of operations (dot_packed.hpp).
#include "kernels/cpu/dot_packed.hpp"

#include <cmath>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"

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

// Code j of one row's block, for each layout; `codes` points at the row's
// first code byte in the block (file) or at the group's code area (packed,
// with the row index r).
struct Q4File {
  static constexpr size_t kBlock = 18;
  static int32_t isum(const std::byte* block, int /*r*/, const Q8Block32& a) {
    const auto* qs = reinterpret_cast<const uint8_t*>(block + 2);
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += q4_nibble(qs, j) * a.qs[j];
    return sum - 8 * a.sum;
  }
  static float scale(const std::byte* block, int /*r*/) { return fp16_at(block); }
};

struct Q8File {
  static constexpr size_t kBlock = 34;
  static int32_t isum(const std::byte* block, int /*r*/, const Q8Block32& a) {
    const auto* qs = reinterpret_cast<const int8_t*>(block + 2);
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += qs[j] * a.qs[j];
    return sum;
  }
  static float scale(const std::byte* block, int /*r*/) { return fp16_at(block); }
};

// Packed: byte j of row r's codes sits at chunk j / 4, lane r.
inline size_t packed_code_offset(int r, int j) {
  return 2 * kPackRows + 32 * static_cast<size_t>(j / 4) + 4 * static_cast<size_t>(r) + j % 4;
}

struct Q4Packed {
  static constexpr size_t kBlock = 144;
  static int32_t isum(const std::byte* block, int r, const Q8Block32& a) {
    uint8_t qs[16];
    for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(block[packed_code_offset(r, j)]);
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += q4_nibble(qs, j) * a.qs[j];
    return sum - 8 * a.sum;
  }
  static float scale(const std::byte* block, int r) { return fp16_at(block + 2 * r); }
};

struct Q8Packed {
  static constexpr size_t kBlock = 272;
  static int32_t isum(const std::byte* block, int r, const Q8Block32& a) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      sum += static_cast<int8_t>(block[packed_code_offset(r, j)]) * a.qs[j];
    }
    return sum;
  }
  static float scale(const std::byte* block, int r) { return fp16_at(block + 2 * r); }
};

// The canonical accumulation for weight row r of `blocks`.
template <typename Format>
float dot_one(const std::byte* blocks, int r, const Q8Block32* a, int64_t n_blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = blocks + static_cast<size_t>(b) * Format::kBlock;
    const auto isum = static_cast<float>(Format::isum(block, r, a[b]));
    acc = std::fma(isum, Format::scale(block, r) * a[b].d, acc);
  }
  return acc;
}

template <typename Format>
void row_kernel(const std::byte* row, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i) out[i] = dot_one<Format>(row, 0, a + i * a_stride, n_blocks);
}

template <typename Format>
void group_kernel(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                  int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i) {
    for (int r = 0; r < kPackRows; ++r) {
      out[i * kPackRows + r] = dot_one<Format>(group, r, a + i * a_stride, n_blocks);
    }
  }
}

}  // namespace

PackedDot packed_dot(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return group_kernel<Q4Packed>;
    case PackedLayout::q8_0x8:
      return group_kernel<Q8Packed>;
    default:  // none, and the K layouts (dot_kquants_packed.hpp)
      break;
  }
  return nullptr;
}

RowDot row_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return row_kernel<Q4File>;
    case GgmlType::Q8_0:
      return row_kernel<Q8File>;
    default:
      return nullptr;
  }
}

}  // namespace scalar

PackedDot packed_dot(PackedLayout layout) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) {
    if (const PackedDot kernel = avx2::packed_dot(layout)) return kernel;
  }
#endif
  return scalar::packed_dot(layout);
}

RowDot row_dot(GgmlType type) {
  return scalar::row_dot(type);
}

int packed_dot_max_rows(PackedLayout layout) {
  return layout == PackedLayout::q4_0x8 ? kMaxPackedRows : 4;
}

}  // namespace cortiq::kernels
