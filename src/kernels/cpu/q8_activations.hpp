// Activation rows quantized once to 8-bit blocks, the left operand of every
// integer dot product. The values are exactly those round_activations
// produces (q * d there is the same float as q * d here), so a product over
// these blocks sees the activations the reference matmul sees; only the
// summation order is the integer kernels' own.
//
//   Q8Block32  pairs with Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 weights (ggml's
//              Q8_0): 32 codes, the scale rounded through fp16, and the sum
//              of the codes (the offset term of unsigned weight codes).
//   Q8BlockK   pairs with the K-quants and IQ4_XS (ggml's Q8_K): 256 codes,
//              a float scale, and the sums of each 16 codes (the min terms).
#pragma once

#include <cstdint>

namespace cortiq::kernels {

struct Q8Block32 {
  float d = 0;      // fp16(amax / 127) as a float
  int32_t sum = 0;  // sum of qs
  int8_t qs[32] = {};
};

struct Q8BlockK {
  float d = 0;  // 1 / iscale, a plain float
  int8_t qs[256] = {};
  int16_t bsums[16] = {};  // bsums[j] = sum of qs[16 j .. 16 j + 15]
};

// x[0, n) quantized into n / 32 (n / 256) blocks; n a whole number of
// blocks (the caller checks). Dispatched to the SIMD level; every level
// gives the same blocks.
void quantize_q8_0(const float* x, Q8Block32* out, int64_t n);
void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n);

// The sum ggml's Q8_1 block keeps beside the codes quantized from x[0, 32),
// whose sum is code_sum: s = fp16(d * code_sum) with d = amax / 127 before
// its fp16 rounding, as a float. Q4_1/Q5_1 dots multiply the weight's min
// by it.
float q8_1_block_sum(const float* x, int32_t code_sum);

namespace scalar {
void quantize_q8_0(const float* x, Q8Block32* out, int64_t n);
void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n);
}  // namespace scalar
namespace avx2 {
void quantize_q8_0(const float* x, Q8Block32* out, int64_t n);
void quantize_q8_k(const float* x, Q8BlockK* out, int64_t n);
}  // namespace avx2

}  // namespace cortiq::kernels
