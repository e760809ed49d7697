// y[t][r] = dot(W row r, x row t): the body every matmul_TYPE.comp shares.
// The including file defines BLOCK_ELEMS and BLOCK_BYTES (the weight type's
// block geometry) and decode_block(), which turns the block at a byte offset
// of the weight buffer into BLOCK_ELEMS floats.
//
// One workgroup per (row, tile of TILE tokens). Invocation i takes blocks i,
// i + WG, i + 2 WG, ... of the row, decodes each once and accumulates it
// into one sum per token of the tile; the WG partial sums of each token are
// then added by a fixed tree in shared memory. The order of every
// operation that produces y[t][r] depends only on n_cols, never on n_tok or
// on the token's place in its tile, so the result is batch invariant. The
// sums are `precise` and use fma(): each tile slot then compiles to the same
// rounding steps (no contraction left to the driver's choice), and no
// subgroup operation is used, so any subgroup size gives the same bits.
//
// The weights are read as 32-bit words and unpacked (the blocks sit at any
// 2-byte offset), so no 8- or 16-bit storage feature is needed.
#extension GL_GOOGLE_include_directive : require

#define WG 64u
#define TILE 4u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer Weights { uint weight_words[]; };
layout(std430, binding = 1) readonly buffer Activations { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Params {
  uint n_rows;
  uint n_cols;
  uint n_tok;
  uint row_bytes;
  uint x_offset;  // in floats: where x's first row starts
  uint y_offset;  // in floats: where y's first row starts
  uint y_stride;  // floats from one row of y to the next (>= n_rows)
} p;

shared float partial[TILE * WG];

#include "weight_bytes.glsl"

void decode_block(uint offset, out float w[BLOCK_ELEMS]);

void main() {
  // Rows run over x and y of the grid: one dimension holds only 65535 groups.
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.n_rows) return;  // the whole workgroup leaves: no barrier is split
  const uint lid = gl_LocalInvocationID.x;
  const uint tok0 = gl_WorkGroupID.z * TILE;
  const uint n_here = min(TILE, p.n_tok - tok0);

  precise float acc[TILE];
  for (uint t = 0u; t < TILE; ++t) acc[t] = 0.0;
  const uint n_blocks = p.n_cols / BLOCK_ELEMS;
  const uint row_offset = row * p.row_bytes;
  for (uint b = lid; b < n_blocks; b += WG) {
    float w[BLOCK_ELEMS];
    decode_block(row_offset + b * BLOCK_BYTES, w);
    const uint col0 = b * BLOCK_ELEMS;
    for (uint t = 0u; t < TILE; ++t) {
      if (t < n_here) {
        const uint xo = p.x_offset + (tok0 + t) * p.n_cols + col0;
        for (uint j = 0u; j < BLOCK_ELEMS; ++j) acc[t] = fma(w[j], x[xo + j], acc[t]);
      }
    }
  }

  for (uint t = 0u; t < TILE; ++t) partial[t * WG + lid] = acc[t];
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) {
      for (uint t = 0u; t < TILE; ++t) partial[t * WG + lid] += partial[t * WG + lid + s];
    }
    barrier();
  }
  if (lid < n_here) y[p.y_offset + (tok0 + lid) * p.y_stride + row] = partial[lid * WG];
}
