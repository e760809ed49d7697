// The scalar kernels of dot_quants32.hpp, which define the order of
// operations every SIMD level reproduces, and the dispatch of the Q8_1 min
// correction.
#include "kernels/cpu/dot_quants32.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "quant/blocks.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::kernels {

namespace scalar {
namespace {

using namespace quant;

// A block decoded once for every activation row: its 32 codes as signed
// bytes in element order, its scale, and its min (Q4_1/Q5_1).
struct Decoded {
  std::array<int8_t, 32> codes;
  float scale = 0.0f;
  float min = 0.0f;
};

// The nibbles of 16 code bytes: low nibbles are elements 0..15, high
// nibbles 16..31 (every type here).
void put_nibbles(const std::array<uint8_t, 16>& qs, std::array<int8_t, 32>& codes) {
  for (int j = 0; j < 16; ++j) {
    codes[j] = static_cast<int8_t>(qs[j] & 0x0F);
    codes[j + 16] = static_cast<int8_t>(qs[j] >> 4);
  }
}

// Bit j of qh (little-endian) as bit 4 of code j: the Q5 codes 0..31.
// Eight codes at a time in a 64-bit word (byte t = code 8k + t): the qh
// byte copied into every byte, bit t kept in byte t, and a set bit moved
// to bit 4 (adding 0x7F carries into bit 7 exactly when the byte is not
// 0). A loop over single bits cost about 100 cycles a block.
void add_fifth_bits(const std::array<uint8_t, 4>& qh, std::array<int8_t, 32>& codes) {
  for (size_t k = 0; k < 4; ++k) {
    const uint64_t bit_t = (qh[k] * 0x0101010101010101ull) & 0x8040201008040201ull;
    const uint64_t fifth = (((bit_t + 0x7F7F7F7F7F7F7F7Full) >> 7) & 0x0101010101010101ull) << 4;
    uint64_t eight;
    std::memcpy(&eight, codes.data() + 8 * k, sizeof(eight));
    eight |= fifth;
    std::memcpy(codes.data() + 8 * k, &eight, sizeof(eight));
  }
}

Decoded decode_q4_1(const std::byte* bytes) {
  const auto w = load_block<BlockQ4_1>(bytes);
  Decoded block{{}, fp16_to_fp32(w.d), fp16_to_fp32(w.m)};
  put_nibbles(w.qs, block.codes);
  return block;
}

Decoded decode_q5_1(const std::byte* bytes) {
  const auto w = load_block<BlockQ5_1>(bytes);
  Decoded block{{}, fp16_to_fp32(w.d), fp16_to_fp32(w.m)};
  put_nibbles(w.qs, block.codes);
  add_fifth_bits(w.qh, block.codes);
  return block;
}

// The codes are q - 16, so the integer sum is exactly that of q minus
// 16 * a.sum.
Decoded decode_q5_0(const std::byte* bytes) {
  const auto w = load_block<BlockQ5_0>(bytes);
  Decoded block{{}, fp16_to_fp32(w.d)};
  put_nibbles(w.qs, block.codes);
  add_fifth_bits(w.qh, block.codes);
  for (int8_t& code : block.codes) code = static_cast<int8_t>(code - 16);
  return block;
}

// The codes through a 16-entry table (kIq4nlValues, kMxfp4Values).
void look_up(const std::array<int8_t, 16>& table, std::array<int8_t, 32>& codes) {
  for (int8_t& code : codes) code = table[static_cast<size_t>(code)];
}

Decoded decode_iq4_nl(const std::byte* bytes) {
  const auto w = load_block<BlockIq4Nl>(bytes);
  Decoded block{{}, fp16_to_fp32(w.d)};
  put_nibbles(w.qs, block.codes);
  look_up(kIq4nlValues, block.codes);
  return block;
}

Decoded decode_mxfp4(const std::byte* bytes) {
  const auto w = load_block<BlockMxfp4>(bytes);
  Decoded block{{}, e8m0_to_fp32_half(w.e)};
  put_nibbles(w.qs, block.codes);
  look_up(kMxfp4Values, block.codes);
  return block;
}

// The exact integer sum of a block: a plain loop the compiler vectorizes.
int32_t block_dot(const std::array<int8_t, 32>& codes, const int8_t* qs) {
  int32_t isum = 0;
  for (int j = 0; j < 32; ++j) isum += codes[j] * qs[j];
  return isum;
}

// One block of the canonical order (dot_quants32.hpp): with a min, the
// block's value first, then one add into acc; else one fma into acc.
template <bool kMin>
float fold(float acc, const Decoded& w, const Q8Block32& a) {
  const auto isum = static_cast<float>(block_dot(w.codes, a.qs));
  if constexpr (kMin) {
    const float min_part = w.min * (a.d * static_cast<float>(a.sum));
    return acc + std::fma(isum, w.scale * a.d, min_part);
  } else {
    return std::fma(isum, w.scale * a.d, acc);
  }
}

using Decode = Decoded (*)(const std::byte* block);

// A row: each block decoded once, then folded into every activation row's
// accumulator (up to 4 at a time); per output, the blocks in order from
// acc = 0.
template <Decode kDecode, size_t kBlockBytes, bool kMin>
void row_kernel(const std::byte* row, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  for (int first = 0; first < n_act; first += 4) {
    const int n = std::min(4, n_act - first);
    std::array<float, 4> acc{};
    for (int64_t b = 0; b < n_blocks; ++b) {
      const Decoded w = kDecode(row + static_cast<size_t>(b) * kBlockBytes);
      for (int i = 0; i < n; ++i) acc[i] = fold<kMin>(acc[i], w, a[(first + i) * a_stride + b]);
    }
    for (int i = 0; i < n; ++i) out[first + i] = acc[i];
  }
}

// The Q8_1 min correction (dot_quants32.hpp): blocks into 8 lanes, then
// the lanes folded in halves. Q4_1 and Q5_1 keep the min at byte 2.
static_assert(offsetof(BlockQ4_1, m) == 2 && offsetof(BlockQ5_1, m) == 2);
template <size_t kBlockBytes>
void min_correction(const std::byte* row, const float* c, int64_t c_stride, int n_act,
                    int64_t n_blocks, float* out) {
  for (int i = 0; i < n_act; ++i, c += c_stride) {
    std::array<float, 8> lanes{};
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint16_t m;
      std::memcpy(&m, row + static_cast<size_t>(b) * kBlockBytes + 2, sizeof(m));
      float& lane = lanes[static_cast<size_t>(b % 8)];
      lane = std::fma(fp16_to_fp32(m), c[b], lane);
    }
    for (size_t k = 0; k < 4; ++k) lanes[k] += lanes[k + 4];
    for (size_t k = 0; k < 2; ++k) lanes[k] += lanes[k + 2];
    out[i] += lanes[0] + lanes[1];
  }
}

}  // namespace

MinCorrection q8_1_min_correction(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
      return min_correction<sizeof(BlockQ4_1)>;
    case GgmlType::Q5_1:
      return min_correction<sizeof(BlockQ5_1)>;
    default:
      return nullptr;
  }
}

RowDot quants32_row_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
      return row_kernel<decode_q4_1, sizeof(BlockQ4_1), true>;
    case GgmlType::Q5_0:
      return row_kernel<decode_q5_0, sizeof(BlockQ5_0), false>;
    case GgmlType::Q5_1:
      return row_kernel<decode_q5_1, sizeof(BlockQ5_1), true>;
    case GgmlType::IQ4_NL:
      return row_kernel<decode_iq4_nl, sizeof(BlockIq4Nl), false>;
    case GgmlType::MXFP4:
      return row_kernel<decode_mxfp4, sizeof(BlockMxfp4), false>;
    default:
      return nullptr;
  }
}

}  // namespace scalar

MinCorrection q8_1_min_correction(GgmlType type) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) {
    if (const MinCorrection kernel = avx2::q8_1_min_correction(type)) return kernel;
  }
#endif
  return scalar::q8_1_min_correction(type);
}

}  // namespace cortiq::kernels
