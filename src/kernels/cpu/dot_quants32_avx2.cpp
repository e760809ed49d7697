// AVX2 kernels of dot_quants32.hpp. A block's 32 weight codes are decoded
// once into one register (byte j = element j) and meet up to four
// activation rows; each block's products are widened to 8 int32 lanes, the
// lanes of four blocks reduced together (hadd) to the four exact block sums,
// converted to float in one instruction, and then folded into the row's
// accumulator with the same scalar float operations as the scalar kernels
// (dot_quants32.cpp) — so the results are the same bits.
//
// Nothing here may be a weak symbol (tools/check-simd-objects.sh): helpers
// are in an anonymous namespace and no inline function of a shared header is
// called (hence the own copy of the E8M0 scale below).
#include <immintrin.h>

#include <bit>
#include <cstring>

#include "kernels/cpu/dot_quants32.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace cortiq::kernels::avx2 {

namespace {

// Blocks whose sums are reduced and converted together.
constexpr int kGroup = 4;

// fma(a, b, c), correctly rounded (as std::fma).
float fmadd(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);  // a vfmadd instruction under -mfma
}

// The 32 nibbles of 16 code bytes, one per byte: low nibbles are elements
// 0..15, high nibbles 16..31.
__m256i nibbles(const std::byte* qs) {
  const __m128i q = load128(qs);
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 0xFF in byte j where bit j of the 32 bits at p is set, else 0.
__m256i bit_bytes(const std::byte* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  // Byte j takes byte j / 8 of the bits, then everything but its bit j % 8
  // is set: all ones exactly when that bit was.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303));
  const __m256i others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1));
}

// 2^(e - 128), as quant::e8m0_to_fp32_half: e = 0 and 1 are subnormals.
float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// ---- The types ---------------------------------------------------------------
//
// Each gives its block size, its 32 codes as bytes, the block scale (and
// the min of Q4_1/Q5_1). Unsigned codes meet the activations directly in
// maddubs; signed ones as maddubs(|w|, sign(a, w)), which is w * a as long
// as a != -128 (quantize_q8_0 keeps codes in [-127, 127]). The largest
// pair of products maddubs adds in int16 is 2 * 31 * 127 (Q5_1), 2 * 16 *
// 127 (Q5_0), 2 * 127 * 127 = 32258 (IQ4_NL), 2 * 12 * 127 (MXFP4): never
// saturated.

struct Q4_1 {
  static constexpr int64_t kBytes = 20;
  static constexpr bool kSigned = false;
  static constexpr bool kMin = true;
  static __m256i codes(const std::byte* block) { return nibbles(block + 4); }
  static float scale(const std::byte* block) { return half_at(block); }
  static float min(const std::byte* block) { return half_at(block + 2); }
};

// q = nibble | fifth bit << 4, 0..31.
struct Q5_1 {
  static constexpr int64_t kBytes = 24;
  static constexpr bool kSigned = false;
  static constexpr bool kMin = true;
  static __m256i codes(const std::byte* block) {
    const __m256i fifth = _mm256_and_si256(bit_bytes(block + 4), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(nibbles(block + 8), fifth);
  }
  static float scale(const std::byte* block) { return half_at(block); }
  static float min(const std::byte* block) { return half_at(block + 2); }
};

// q - 16 as a signed byte: the nibble itself when the fifth bit is set,
// else the nibble - 16, i.e. the nibble with the top four bits set.
struct Q5_0 {
  static constexpr int64_t kBytes = 22;
  static constexpr bool kSigned = true;
  static constexpr bool kMin = false;
  static __m256i codes(const std::byte* block) {
    const __m256i low = _mm256_andnot_si256(bit_bytes(block + 2), _mm256_set1_epi8(-16));
    return _mm256_or_si256(nibbles(block + 6), low);
  }
  static float scale(const std::byte* block) { return half_at(block); }
  static float min(const std::byte*) { return 0.0f; }
};

struct Iq4Nl {
  static constexpr int64_t kBytes = 18;
  static constexpr bool kSigned = true;
  static constexpr bool kMin = false;
  static __m256i codes(const std::byte* block) {
    const __m256i values =
        _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                         -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    return _mm256_shuffle_epi8(values, nibbles(block + 2));
  }
  static float scale(const std::byte* block) { return half_at(block); }
  static float min(const std::byte*) { return 0.0f; }
};

// The E2M1 codes doubled (quant::kMxfp4Values), the scale halved.
struct Mxfp4 {
  static constexpr int64_t kBytes = 17;
  static constexpr bool kSigned = true;
  static constexpr bool kMin = false;
  static __m256i codes(const std::byte* block) {
    const __m256i values =
        _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0, 1, 2, 3, 4, 6,
                         8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    return _mm256_shuffle_epi8(values, nibbles(block + 1));
  }
  static float scale(const std::byte* block) {
    return e8m0_half(std::to_integer<uint8_t>(block[0]));
  }
  static float min(const std::byte*) { return 0.0f; }
};

// ---- The kernel ------------------------------------------------------------

// One decoded block: the operand maddubs takes unsigned (the codes, or
// their magnitudes), the codes (for their signs), the scale and min.
struct Decoded {
  __m256i magnitude;
  __m256i codes;
  float scale;
  float min;
};

template <typename Type>
Decoded decode(const std::byte* block) {
  const __m256i codes = Type::codes(block);
  if constexpr (Type::kSigned) {
    return {_mm256_sign_epi8(codes, codes), codes, Type::scale(block), Type::min(block)};
  } else {
    return {codes, codes, Type::scale(block), Type::min(block)};
  }
}

// The block's 32 products with the activation codes, in 8 int32 lanes.
template <typename Type>
__m256i products(const Decoded& w, const int8_t* qs) {
  __m256i a = load256(qs);
  if constexpr (Type::kSigned) a = _mm256_sign_epi8(a, w.codes);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.magnitude, a), _mm256_set1_epi16(1));
}

// Lane k: the sum of the 8 lanes of p[k].
__m128i block_sums(const __m256i p[kGroup]) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The scalar kernels' fold (dot_quants32.cpp), isum already a float.
template <typename Type>
float fold(float acc, float isum, const Decoded& w, const Q8Block32& a) {
  if constexpr (Type::kMin) {
    const float min_part = w.min * (a.d * static_cast<float>(a.sum));
    return acc + fmadd(isum, w.scale * a.d, min_part);
  } else {
    return fmadd(isum, w.scale * a.d, acc);
  }
}

// kCount (1..kGroup) blocks starting at `row` against N activation rows
// starting at block `a` (row r at a + r * a_stride). Always inlined: as a
// call, the accumulators went through memory (acc might alias a.d as far
// as the compiler knew), and the store-to-load latency joined the chain
// of dependent adds that bounds a one-row kernel (matmul decode took 1.2
// to 1.3 times as long).
template <typename Type, int N, int kCount>
[[gnu::always_inline]] inline void group(const std::byte* row, const Q8Block32* a, int64_t a_stride,
                                         float acc[N]) {
  Decoded w[kCount];
  for (int k = 0; k < kCount; ++k) w[k] = decode<Type>(row + k * Type::kBytes);
  for (int r = 0; r < N; ++r) {
    const Q8Block32* ar = a + r * a_stride;
    __m256i p[kGroup];
    for (int k = 0; k < kGroup; ++k) {
      p[k] = k < kCount ? products<Type>(w[k], ar[k].qs) : _mm256_setzero_si256();
    }
    alignas(16) float isum[kGroup];
    _mm_store_ps(isum, _mm_cvtepi32_ps(block_sums(p)));
    for (int k = 0; k < kCount; ++k) acc[r] = fold<Type>(acc[r], isum[k], w[k], ar[k]);
  }
}

template <typename Type, int N>
void row_kernel(const std::byte* row, const Q8Block32* a, int64_t a_stride, int64_t n_blocks,
                float* out) {
  constexpr int64_t kGroupBytes = kGroup * Type::kBytes;
  float acc[N];
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  int64_t b = 0;
  for (; b + kGroup <= n_blocks; b += kGroup, row += kGroupBytes) {
    if (N == 1) prefetch_ahead(row, kGroupBytes);
    group<Type, N, kGroup>(row, a + b, a_stride, acc);
  }
  switch (n_blocks - b) {
    case 1:
      group<Type, N, 1>(row, a + b, a_stride, acc);
      break;
    case 2:
      group<Type, N, 2>(row, a + b, a_stride, acc);
      break;
    case 3:
      group<Type, N, 3>(row, a + b, a_stride, acc);
      break;
    default:
      break;
  }
  for (int r = 0; r < N; ++r) out[r] = acc[r];
}

template <typename Type>
void row_dot_of(const std::byte* row, const Q8Block32* a, int64_t a_stride, int n_act,
                int64_t n_blocks, float* out) {
  switch (n_act) {
    case 1:
      return row_kernel<Type, 1>(row, a, a_stride, n_blocks, out);
    case 2:
      return row_kernel<Type, 2>(row, a, a_stride, n_blocks, out);
    case 3:
      return row_kernel<Type, 3>(row, a, a_stride, n_blocks, out);
    default:
      return row_kernel<Type, 4>(row, a, a_stride, n_blocks, out);
  }
}

// ---- The Q8_1 min correction -------------------------------------------------
//
// Eight blocks at a time: their mins converted once, then one fma per
// activation row fills its eight lanes, as the scalar loop does lane by
// lane; a tail of fewer than eight blocks and the fold are the scalar code.
template <int N, int64_t kBytes>
void min_correction_rows(const std::byte* row, const float* c, int64_t c_stride, int64_t n_blocks,
                         float* out) {
  const auto min_bits = [row](int64_t b) {
    uint16_t m;
    std::memcpy(&m, row + b * kBytes + 2, sizeof(m));  // the min follows d
    return static_cast<short>(m);
  };
  __m256 lanes[N];
  for (int i = 0; i < N; ++i) lanes[i] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= n_blocks; b += 8) {
    const __m256 mins = _mm256_cvtph_ps(
        _mm_setr_epi16(min_bits(b), min_bits(b + 1), min_bits(b + 2), min_bits(b + 3),
                       min_bits(b + 4), min_bits(b + 5), min_bits(b + 6), min_bits(b + 7)));
    for (int i = 0; i < N; ++i) {
      lanes[i] = _mm256_fmadd_ps(mins, _mm256_loadu_ps(c + i * c_stride + b), lanes[i]);
    }
  }
  for (int i = 0; i < N; ++i) {
    alignas(32) float lane[8];
    _mm256_store_ps(lane, lanes[i]);
    for (int64_t t = b; t < n_blocks; ++t) {
      lane[t % 8] = fmadd(half_at(row + t * kBytes + 2), c[i * c_stride + t], lane[t % 8]);
    }
    for (int k = 0; k < 4; ++k) lane[k] += lane[k + 4];
    for (int k = 0; k < 2; ++k) lane[k] += lane[k + 2];
    out[i] += lane[0] + lane[1];
  }
}

template <int64_t kBytes>
void min_correction(const std::byte* row, const float* c, int64_t c_stride, int n_act,
                    int64_t n_blocks, float* out) {
  switch (n_act) {
    case 1:
      return min_correction_rows<1, kBytes>(row, c, c_stride, n_blocks, out);
    case 2:
      return min_correction_rows<2, kBytes>(row, c, c_stride, n_blocks, out);
    case 3:
      return min_correction_rows<3, kBytes>(row, c, c_stride, n_blocks, out);
    default:
      return min_correction_rows<4, kBytes>(row, c, c_stride, n_blocks, out);
  }
}

}  // namespace

MinCorrection q8_1_min_correction(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
      return min_correction<Q4_1::kBytes>;
    case GgmlType::Q5_1:
      return min_correction<Q5_1::kBytes>;
    default:
      return nullptr;
  }
}

RowDot quants32_row_dot(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
      return row_dot_of<Q4_1>;
    case GgmlType::Q5_0:
      return row_dot_of<Q5_0>;
    case GgmlType::Q5_1:
      return row_dot_of<Q5_1>;
    case GgmlType::IQ4_NL:
      return row_dot_of<Iq4Nl>;
    case GgmlType::MXFP4:
      return row_dot_of<Mxfp4>;
    default:
      return nullptr;
  }
}

}  // namespace cortiq::kernels::avx2
