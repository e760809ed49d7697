// On-disk block layouts of the quantized types, byte for byte as GGUF stores
// them (little-endian, no padding). Each struct is one block; fp16 fields are
// raw IEEE half bits. Rows are read and written by copying whole blocks in
// and out of these structs, so byte spans of any alignment are fine.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace cortiq::quant {

static_assert(std::endian::native == std::endian::little,
              "the block layouts are little-endian, as GGUF stores them");

// Elements per block of the legacy and non-linear 32-element formats, and of
// the 256-element "K" super-blocks.
inline constexpr int kBlock32 = 32;
inline constexpr int kSuperBlock = 256;
// Bytes of packed scales and mins in Q4_K / Q5_K (8 six-bit pairs).
inline constexpr int kKScaleBytes = 12;

// x = d * (q - 8), q in 0..15.
struct BlockQ4_0 {
  uint16_t d;
  std::array<uint8_t, kBlock32 / 2> qs;  // low nibbles: elements 0..15, high: 16..31
};

// x = d * q + m, q in 0..15.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  std::array<uint8_t, kBlock32 / 2> qs;
};

// x = d * (q - 16), q in 0..31; the fifth bits live in qh, bit j for element j.
struct BlockQ5_0 {
  uint16_t d;
  std::array<uint8_t, 4> qh;
  std::array<uint8_t, kBlock32 / 2> qs;
};

// x = d * q + m, q in 0..31.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  std::array<uint8_t, 4> qh;
  std::array<uint8_t, kBlock32 / 2> qs;
};

// x = d * q, q in -128..127.
struct BlockQ8_0 {
  uint16_t d;
  std::array<int8_t, kBlock32> qs;
};

// 16 groups of 16: x = d * sc * q - dmin * m, with 4-bit sc (low) and m (high)
// per group and 2-bit q.
struct BlockQ2_K {
  std::array<uint8_t, kSuperBlock / 16> scales;
  std::array<uint8_t, kSuperBlock / 4> qs;
  uint16_t d;
  uint16_t dmin;
};

// 16 groups of 16: x = d * (sc - 32) * (q - 4), 6-bit sc packed into 12
// bytes, q's low 2 bits in qs and high bit in hmask.
struct BlockQ3_K {
  std::array<uint8_t, kSuperBlock / 8> hmask;
  std::array<uint8_t, kSuperBlock / 4> qs;
  std::array<uint8_t, 12> scales;
  uint16_t d;
};

// 8 groups of 32: x = d * sc * q - dmin * m, 6-bit sc and m packed into 12
// bytes, 4-bit q.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  std::array<uint8_t, kKScaleBytes> scales;
  std::array<uint8_t, kSuperBlock / 2> qs;
};

// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  std::array<uint8_t, kKScaleBytes> scales;
  std::array<uint8_t, kSuperBlock / 8> qh;
  std::array<uint8_t, kSuperBlock / 2> qs;
};

// 16 groups of 16: x = d * sc * (q - 32), 8-bit signed sc, 6-bit q split into
// low nibbles (ql) and high pairs (qh).
struct BlockQ6_K {
  std::array<uint8_t, kSuperBlock / 2> ql;
  std::array<uint8_t, kSuperBlock / 4> qh;
  std::array<int8_t, kSuperBlock / 16> scales;
  uint16_t d;
};

// x = d * kIq4nlValues[q], q in 0..15.
struct BlockIq4Nl {
  uint16_t d;
  std::array<uint8_t, kBlock32 / 2> qs;
};

// 8 groups of 32: x = d * (sc - 32) * kIq4nlValues[q], 6-bit sc split into
// scales_l (low nibbles) and scales_h (2 bits per group).
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  std::array<uint8_t, kSuperBlock / 64> scales_l;
  std::array<uint8_t, kSuperBlock / 2> qs;
};

// x = 2^(e - 128) * kMxfp4Values[q]: an E8M0 shared exponent and E2M1 codes.
struct BlockMxfp4 {
  uint8_t e;
  std::array<uint8_t, kBlock32 / 2> qs;
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);
static_assert(sizeof(BlockMxfp4) == 17);

// The 16 levels of IQ4_NL / IQ4_XS: a non-uniform grid denser near zero.
inline constexpr std::array<int8_t, 16> kIq4nlValues = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                        1,    13,   25,  38,  53,  69,  89,  113};

// The 16 E2M1 codes of MXFP4 as integers, doubled so that 0.5 is 1; the
// block exponent is halved to compensate (see e8m0_to_fp32_half).
inline constexpr std::array<int8_t, 16> kMxfp4Values = {0, 1,  2,  3,  4,  6,  8,  12,
                                                        0, -1, -2, -3, -4, -6, -8, -12};

// Block i of a byte row, copied out (the row may sit at any alignment).
template <typename Block>
Block load_block(std::span<const std::byte> row, size_t i) {
  Block block;
  std::memcpy(&block, row.data() + i * sizeof(Block), sizeof(Block));
  return block;
}

// The block that starts at `at`.
template <typename Block>
Block load_block(const std::byte* at) {
  Block block;
  std::memcpy(&block, at, sizeof(Block));
  return block;
}

template <typename Block>
void store_block(std::span<std::byte> row, size_t i, const Block& block) {
  std::memcpy(row.data() + i * sizeof(Block), &block, sizeof(Block));
}

}  // namespace cortiq::quant
