// Integer dot products of the other 32-element weight types — Q4_1, Q5_0,
// Q5_1, IQ4_NL and MXFP4 — with activation rows in Q8Block32 blocks: the
// matmul kernels for these types, one weight row as the file stores it
// against up to four activation rows (RowDot, dot_packed.hpp).
//
// The order of operations, defined by the scalar kernels (namespace scalar)
// and reproduced bit for bit by every SIMD level: per output, acc = 0, then
// for each 32-element block b in order, with a = activation block b, every
// integer sum exact in int32 and d_w the block's fp16 scale as a float
// (exact):
//
//   Q5_0    isum = sum_j q_j * a.qs[j] - 16 * a.sum    (q 0..31, code q - 16)
//           acc  = fma(float(isum), d_w * a.d, acc)
//   IQ4_NL  isum = sum_j kIq4nlValues[q_j] * a.qs[j]
//           acc  = fma(float(isum), d_w * a.d, acc)
//   MXFP4   isum = sum_j kMxfp4Values[q_j] * a.qs[j]    (E2M1 doubled)
//           acc  = fma(float(isum), s_w * a.d, acc)
//           s_w  = 2^(e - 128), the halved E8M0 scale (e8m0_to_fp32_half)
//   Q4_1,   isum = sum_j q_j * a.qs[j]                  (q unsigned)
//   Q5_1    acc  = acc + fma(float(isum), d_w * a.d, m_w * (a.d * float(a.sum)))
//           with m_w the block's fp16 min as a float
//
// and out = acc after the last block. Each product is a plain float
// multiply and each fma one rounding (std::fma; the project builds with
// -ffp-contract=off, so nothing else is fused). Mathematically each block
// adds sum_j dequant(w)_j * (a.d * a.qs[j]), the values dequantize_row and
// round_activations give. Q4_1/Q5_1 put one add, not two fmas, on the
// chain that carries acc from block to block: a row kernel computing one
// output is bound by that chain's latency.
//
// The peer pairs Q4_1/Q5_1 with Q8_1 blocks, whose min term uses a stored
// s = fp16(unrounded d * sum); Q8Block32 has no s, so these kernels use
// a.d * sum (the dequantized activations' sum) and matmul adds the
// difference afterwards (q8_1_min_correction below), as its float path
// does (matmul.cpp).
//
// Ranges (|a.qs| <= 127, which quantize_q8_0 guarantees and the AVX2
// kernels rely on): |isum| <= 32 * 127 * 127 < 2^24, so float(isum) and
// float(a.sum) are exact.
// Each output has its own accumulator, so the result does not depend on how
// many activation rows are computed together.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dot_packed.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::kernels {

// The Q8_1 min correction of one Q4_1/Q5_1 weight row against n_act
// activation rows (1 <= n_act <= 4; row i's block values at c + i *
// c_stride): out[i] += sum over blocks b of m_w(b) * c_i[b], where c_i[b]
// = s(b) - a.d(b) * float(a.sum(b)) is what the peer's Q8_1 block sum adds
// to the kernels' one (matmul computes c with the activation blocks). The
// order, the same bits on every level: 8 float lanes from 0, block b into
// lane b % 8 as lane = fma(m_w(b), c_i[b], lane); then lane k += lane k + 4
// (k < 4), lane k += lane k + 2 (k < 2), lane 0 + lane 1, and that added
// to out[i] (the row kernel's result) in one float add.
using MinCorrection = void (*)(const std::byte* row, const float* c, int64_t c_stride, int n_act,
                               int64_t n_blocks, float* out);

// At this machine's SIMD level; nullptr for types other than Q4_1, Q5_1.
MinCorrection q8_1_min_correction(GgmlType type);

namespace scalar {
// The kernel for Q4_1, Q5_0, Q5_1, IQ4_NL or MXFP4; nullptr for other types.
RowDot quants32_row_dot(GgmlType type);
MinCorrection q8_1_min_correction(GgmlType type);
}  // namespace scalar
namespace avx2 {
// As the scalar ones, the same bits; nullptr for the same types.
RowDot quants32_row_dot(GgmlType type);
MinCorrection q8_1_min_correction(GgmlType type);
}  // namespace avx2

}  // namespace cortiq::kernels
