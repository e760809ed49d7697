// Weight matrices repacked at load into the interleaved layouts the integer
// kernels read (for Q4_0: a tiled, packed Q4).
//
// Eight consecutive weight rows form a group; a group stores, block by
// block, each field of the block for the eight rows side by side. Scale
// fields are interleaved one field (2 bytes; MXFP4's exponent 1) at a time;
// code fields four
// bytes at a time: chunk k holds bytes 4k..4k+3 of row 0, then of row 1, ...
// row 7. One 256-bit load is then four code bytes of each of eight rows, and
// the products of eight output rows land in the eight 32-bit lanes of one
// register, with no horizontal sums. A group's blocks are contiguous, so a
// thread streams its share of the matrix in order.
//
//   q4_0x8  { uint16 d[8]; uint8 qs[8 x 16] }            144 bytes (= 8 x 18)
//   q8_0x8  { uint16 d[8]; int8  qs[8 x 32] }            272 bytes (= 8 x 34)
//   mxfp4x8 { uint8 e[8]; uint8 qs[8 x 16] }             136 bytes (= 8 x 17)
//   q4_Kx8  { uint16 d[8]; uint16 dmin[8];
//             uint8 scales[8 x 12] (4 bytes at a time);
//             uint8 qs[8 x 128] }                        1152 bytes (= 8 x 144)
//   q6_Kx8  { uint16 d[8]; int8 scales[8 x 16] (2 bytes at a time);
//             uint8 ql[8 x 128]; uint8 qh[8 x 64] }     1680 bytes (= 8 x 210)
//
// (The K blocks are 256-element super-blocks.) Q6_K's scales go two at a
// time so that one sign-extending load gives each row's pair of adjacent
// group scales as int16 in its 32-bit lane.
//
// The packed copy holds the same bytes as the file, rearranged: no
// precision changes, and the same size. Matrices whose row count is not a
// multiple of 8, and types without a packed layout, stay as the file stores
// them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/weight_view.hpp"

namespace cortiq::kernels {

enum class PackedLayout : uint8_t { none, q4_0x8, q8_0x8, q4_Kx8, q6_Kx8, mxfp4x8 };

constexpr int64_t kPackRows = 8;

// The layout a matrix of this type and row count is packed into.
PackedLayout packed_layout(GgmlType type, int64_t n_rows);
// Bytes of one block of one 8-row group in `layout` (0 for none).
size_t packed_block_bytes(PackedLayout layout);
// Whether the layout's blocks are 256-element K super-blocks (the kernels
// take Q8BlockK activations, dot_kquants_packed.hpp) rather than 32-element
// blocks (Q8Block32, dot_packed.hpp).
bool is_k_layout(PackedLayout layout);

// Rearranges w's rows into `out` (w.n_rows * w.row_bytes bytes), groups of
// rows [first_group, end_group) only — so several threads can pack one
// matrix. w must have a packed layout.
void pack_rows(const WeightView& w, std::span<std::byte> out, int64_t first_group,
               int64_t end_group);

// The inverse for one block of one row: row r's block as the file stores it
// (packed_block_bytes(layout) / 8 bytes into out), from the group's packed
// block. The scalar kernels over packed layouts use it to reuse the file
// layout's arithmetic.
void unpack_block(PackedLayout layout, const std::byte* packed_block, int r, std::byte* out);

// Owns the packed copies of a model's matrices.
class PackedWeightStore {
 public:
  // w with `packed` pointing at its packed copy, made on first request (a
  // tied embedding asked for twice is packed once); w unchanged when it has
  // no packed layout.
  WeightView pack(WeightView w);
  size_t bytes() const { return bytes_; }
  // Whether the matrix whose file bytes start at `source` has a packed copy.
  bool holds(const std::byte* source) const { return by_source_.contains(source); }

 private:
  std::vector<std::unique_ptr<std::byte[]>> buffers_;
  std::unordered_map<const std::byte*, const std::byte*> by_source_;
  size_t bytes_ = 0;
};

}  // namespace cortiq::kernels
