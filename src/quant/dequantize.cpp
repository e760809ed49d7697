// dequantize_row: block decoders for every type in can_dequantize(). The
// arithmetic (which products are formed, in which order, in float) follows
// the peer's reference decoders exactly, so the floats match bit for bit.
#include <cstdint>
#include <cstring>
#include <span>

#include "base/fp16.hpp"
#include "kernels/cpu/convert.hpp"
#include "quant/blocks.hpp"
#include "quant/k_scales.hpp"
#include "quant/quantize.hpp"
#include "quant/row_checks.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq {
namespace {

using namespace quant;

template <size_t N>
using Out = std::span<float, N>;

void decode(const BlockQ4_0& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void decode(const BlockQ4_1& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  const float m = fp16_to_fp32(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

// The fifth bits of a Q5 block: bit j of the little-endian word is element j.
uint32_t fifth_bits(const std::array<uint8_t, 4>& qh) {
  uint32_t bits;
  std::memcpy(&bits, qh.data(), sizeof(bits));
  return bits;
}

// The 5-bit codes of elements j and j + 16.
std::pair<int, int> q5_codes(const std::array<uint8_t, 16>& qs, uint32_t high, int j) {
  const int high0 = static_cast<int>(((high >> j) << 4) & 0x10);
  const int high1 = static_cast<int>((high >> (j + 12)) & 0x10);
  return {(qs[j] & 0x0F) | high0, (qs[j] >> 4) | high1};
}

void decode(const BlockQ5_0& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  const uint32_t high = fifth_bits(b.qh);
  for (int j = 0; j < 16; ++j) {
    const auto [q0, q1] = q5_codes(b.qs, high, j);
    y[j] = static_cast<float>(q0 - 16) * d;
    y[j + 16] = static_cast<float>(q1 - 16) * d;
  }
}

void decode(const BlockQ5_1& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  const float m = fp16_to_fp32(b.m);
  const uint32_t high = fifth_bits(b.qh);
  for (int j = 0; j < 16; ++j) {
    const auto [q0, q1] = q5_codes(b.qs, high, j);
    y[j] = static_cast<float>(q0) * d + m;
    y[j + 16] = static_cast<float>(q1) * d + m;
  }
}

void decode(const BlockQ8_0& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

// Q2_K: each 128-element half uses 32 bytes of qs four times over, two bits
// at a time; each pass covers two 16-element groups.
void decode(const BlockQ2_K& b, Out<256> y) {
  const float d = fp16_to_fp32(b.d);
  const float dmin = fp16_to_fp32(b.dmin);
  int out = 0;
  int group = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs.data() + 32 * half;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part, ++group) {
        const uint8_t sc = b.scales[group];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          y[out++] = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: the same 2-bit walk as Q2_K; a clear bit in hmask subtracts 4.
void decode(const BlockQ3_K& b, Out<256> y) {
  const float d = fp16_to_fp32(b.d);
  int out = 0;
  int group = 0;
  uint8_t mask = 1;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs.data() + 32 * half;
    for (int shift = 0; shift < 8; shift += 2, mask <<= 1) {
      for (int part = 0; part < 2; ++part, ++group) {
        const float dl = d * static_cast<float>(q3_k_scale(group, b.scales));
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * part;
          const int code = ((q[i] >> shift) & 3) - ((b.hmask[i] & mask) ? 0 : 4);
          y[out++] = dl * static_cast<float>(code);
        }
      }
    }
  }
}

// Q4_K / Q5_K: four 64-element chunks, each two groups of 32 sharing 32 bytes
// of qs (low nibbles, then high nibbles).
template <typename Block, typename Code>
void decode_k4_layout(const Block& b, Out<256> y, Code code) {
  const float d = fp16_to_fp32(b.d);
  const float dmin = fp16_to_fp32(b.dmin);
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int part = 0; part < 2; ++part) {
      const ScaleAndMin sm = k4_scale_and_min(2 * chunk + part, b.scales);
      const float dl = d * static_cast<float>(sm.scale);
      const float ml = dmin * static_cast<float>(sm.min);
      for (int l = 0; l < 32; ++l) {
        y[64 * chunk + 32 * part + l] = dl * static_cast<float>(code(chunk, part, l)) - ml;
      }
    }
  }
}

void decode(const BlockQ4_K& b, Out<256> y) {
  decode_k4_layout(b, y, [&](int chunk, int part, int l) {
    const uint8_t byte = b.qs[32 * chunk + l];
    return part == 0 ? byte & 0xF : byte >> 4;
  });
}

void decode(const BlockQ5_K& b, Out<256> y) {
  decode_k4_layout(b, y, [&](int chunk, int part, int l) {
    const uint8_t byte = b.qs[32 * chunk + l];
    const int low = part == 0 ? byte & 0xF : byte >> 4;
    const uint8_t high_mask = static_cast<uint8_t>(1u << (2 * chunk + part));
    return low + ((b.qh[l] & high_mask) ? 16 : 0);
  });
}

// Q6_K: each 128-element half takes 64 bytes of ql and 32 of qh; element
// l + 32 * k of the half has its low nibble in ql[l + 32 * (k % 2)] (high
// nibble for k >= 2) and its top 2 bits at bit 2k of qh[l].
void decode(const BlockQ6_K& b, Out<256> y) {
  const float d = fp16_to_fp32(b.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql.data() + 64 * half;
    const uint8_t* qh = b.qh.data() + 32 * half;
    const int8_t* sc = b.scales.data() + 8 * half;
    for (int l = 0; l < 32; ++l) {
      const int group = l / 16;
      for (int k = 0; k < 4; ++k) {
        const int low = k < 2 ? ql[l + 32 * k] & 0xF : ql[l + 32 * (k - 2)] >> 4;
        const int code = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
        y[128 * half + 32 * k + l] =
            d * static_cast<float>(sc[group + 2 * k]) * static_cast<float>(code);
      }
    }
  }
}

void decode(const BlockIq4Nl& b, Out<32> y) {
  const float d = fp16_to_fp32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[b.qs[j] & 0xF]);
    y[j + 16] = d * static_cast<float>(kIq4nlValues[b.qs[j] >> 4]);
  }
}

void decode(const BlockIq4Xs& b, Out<256> y) {
  const float d = fp16_to_fp32(b.d);
  for (int group = 0; group < 8; ++group) {
    const int low = (b.scales_l[group / 2] >> (4 * (group % 2))) & 0xF;
    const int high = (b.scales_h >> (2 * group)) & 3;
    const float dl = d * static_cast<float>((low | (high << 4)) - 32);
    const uint8_t* qs = b.qs.data() + 16 * group;
    for (int j = 0; j < 16; ++j) {
      y[32 * group + j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
      y[32 * group + j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

void decode(const BlockMxfp4& b, Out<32> y) {
  const float d = e8m0_to_fp32_half(b.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(kMxfp4Values[b.qs[j] & 0x0F]) * d;
    y[j + 16] = static_cast<float>(kMxfp4Values[b.qs[j] >> 4]) * d;
  }
}

template <typename Block, size_t N>
void decode_blocks(std::span<const std::byte> src, std::span<float> dst) {
  const size_t n_blocks = dst.size() / N;
  for (size_t i = 0; i < n_blocks; ++i) {
    decode(load_block<Block>(src, i), Out<N>(dst.data() + i * N, N));
  }
}

// Plain element types: one little-endian value per element.
template <typename Element, typename ToFloat>
void decode_elements(std::span<const std::byte> src, std::span<float> dst, ToFloat to_float) {
  for (size_t i = 0; i < dst.size(); ++i) {
    Element value;
    std::memcpy(&value, src.data() + i * sizeof(Element), sizeof(Element));
    dst[i] = to_float(value);
  }
}

// F16/BF16 rows go through the SIMD conversion kernels (bit-identical to the
// scalar conversion) when the bytes are 2-aligned, as tensor data always is.
void decode_halves(std::span<const std::byte> src, std::span<float> dst, bool bf16) {
  if (reinterpret_cast<uintptr_t>(src.data()) % alignof(uint16_t) != 0) {
    return bf16 ? decode_elements<uint16_t>(src, dst, bf16_to_fp32)
                : decode_elements<uint16_t>(src, dst, fp16_to_fp32);
  }
  const std::span<const uint16_t> halves(reinterpret_cast<const uint16_t*>(src.data()), dst.size());
  return bf16 ? kernels::bf16_to_fp32_row(halves, dst) : kernels::fp16_to_fp32_row(halves, dst);
}

float int_to_float(auto value) {
  return static_cast<float>(value);
}

}  // namespace

void dequantize_row(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  check_row("dequantize_row", type, can_dequantize(type), dst.size(), src.size());
  switch (type) {
    case GgmlType::F32:
      if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
      return;
    case GgmlType::F16:
      return decode_halves(src, dst, /*bf16=*/false);
    case GgmlType::BF16:
      return decode_halves(src, dst, /*bf16=*/true);
    case GgmlType::I8:
      return decode_elements<int8_t>(src, dst, int_to_float<int8_t>);
    case GgmlType::I16:
      return decode_elements<int16_t>(src, dst, int_to_float<int16_t>);
    case GgmlType::I32:
      return decode_elements<int32_t>(src, dst, int_to_float<int32_t>);
    case GgmlType::Q4_0:
      return decode_blocks<BlockQ4_0, kBlock32>(src, dst);
    case GgmlType::Q4_1:
      return decode_blocks<BlockQ4_1, kBlock32>(src, dst);
    case GgmlType::Q5_0:
      return decode_blocks<BlockQ5_0, kBlock32>(src, dst);
    case GgmlType::Q5_1:
      return decode_blocks<BlockQ5_1, kBlock32>(src, dst);
    case GgmlType::Q8_0:
      return decode_blocks<BlockQ8_0, kBlock32>(src, dst);
    case GgmlType::Q2_K:
      return decode_blocks<BlockQ2_K, kSuperBlock>(src, dst);
    case GgmlType::Q3_K:
      return decode_blocks<BlockQ3_K, kSuperBlock>(src, dst);
    case GgmlType::Q4_K:
      return decode_blocks<BlockQ4_K, kSuperBlock>(src, dst);
    case GgmlType::Q5_K:
      return decode_blocks<BlockQ5_K, kSuperBlock>(src, dst);
    case GgmlType::Q6_K:
      return decode_blocks<BlockQ6_K, kSuperBlock>(src, dst);
    case GgmlType::IQ4_NL:
      return decode_blocks<BlockIq4Nl, kBlock32>(src, dst);
    case GgmlType::IQ4_XS:
      return decode_blocks<BlockIq4Xs, kSuperBlock>(src, dst);
    case GgmlType::MXFP4:
      return decode_blocks<BlockMxfp4, kBlock32>(src, dst);
    default:
      break;
  }
  // can_dequantize() and this switch disagree: a defect, not bad input.
  throw Error("dequantize_row: no decoder for type " + std::string(ggml_type_name(type)));
}

}  // namespace cortiq
