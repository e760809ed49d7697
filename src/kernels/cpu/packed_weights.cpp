#include "kernels/cpu/packed_weights.hpp"

#include <array>
#include <cstring>

#include "base/error.hpp"

namespace cortiq::kernels {

namespace {

// One field of a file block: `bytes` bytes at `offset`, interleaved across
// the group's rows `width` bytes at a time. The packed block holds the
// fields in table order, each taking 8 x bytes.
struct Field {
  size_t offset;
  size_t bytes;
  size_t width;
};

struct LayoutInfo {
  size_t block_bytes = 0;  // one row's block in the file
  std::array<Field, 4> fields{};
  size_t n_fields = 0;
};

LayoutInfo layout_info(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return {18, {{{0, 2, 2}, {2, 16, 4}}}, 2};
    case PackedLayout::q8_0x8:
      return {34, {{{0, 2, 2}, {2, 32, 4}}}, 2};
    case PackedLayout::mxfp4x8:  // e, qs
      return {17, {{{0, 1, 1}, {1, 16, 4}}}, 2};
    case PackedLayout::q4_Kx8:  // d, dmin, scales, qs
      return {144, {{{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}}, 4};
    case PackedLayout::q6_Kx8:  // d, scales, ql, qh
      return {210, {{{208, 2, 2}, {192, 16, 2}, {0, 128, 4}, {128, 64, 4}}}, 4};
    case PackedLayout::none:
      break;
  }
  return {};
}

}  // namespace

PackedLayout packed_layout(GgmlType type, int64_t n_rows) {
  if (n_rows <= 0 || n_rows % kPackRows != 0) return PackedLayout::none;
  switch (type) {
    case GgmlType::Q4_0:
      return PackedLayout::q4_0x8;
    case GgmlType::Q8_0:
      return PackedLayout::q8_0x8;
    case GgmlType::MXFP4:
      return PackedLayout::mxfp4x8;
    case GgmlType::Q4_K:
      return PackedLayout::q4_Kx8;
    case GgmlType::Q6_K:
      return PackedLayout::q6_Kx8;
    default:
      return PackedLayout::none;
  }
}

size_t packed_block_bytes(PackedLayout layout) {
  return kPackRows * layout_info(layout).block_bytes;
}

bool is_k_layout(PackedLayout layout) {
  return layout == PackedLayout::q4_Kx8 || layout == PackedLayout::q6_Kx8;
}

void pack_rows(const WeightView& w, std::span<std::byte> out, int64_t first_group,
               int64_t end_group) {
  const PackedLayout layout = packed_layout(w.type, w.n_rows);
  const LayoutInfo info = layout_info(layout);
  if (layout == PackedLayout::none || out.size() != static_cast<size_t>(w.n_rows) * w.row_bytes) {
    throw Error("pack_rows: tensor " + std::string(w.name) + " cannot be packed");
  }
  const auto n_blocks = static_cast<int64_t>(w.row_bytes / info.block_bytes);
  const size_t group_block_bytes = kPackRows * info.block_bytes;
  for (int64_t g = first_group; g < end_group; ++g) {
    std::byte* dst = out.data() + static_cast<size_t>(g * n_blocks) * group_block_bytes;
    for (int64_t b = 0; b < n_blocks; ++b, dst += group_block_bytes) {
      std::byte* field_dst = dst;
      for (size_t f = 0; f < info.n_fields; ++f) {
        const Field& field = info.fields[f];
        for (int64_t r = 0; r < kPackRows; ++r) {
          const std::byte* src =
              w.row(g * kPackRows + r).data() + b * info.block_bytes + field.offset;
          for (size_t k = 0; k < field.bytes / field.width; ++k) {
            std::memcpy(field_dst + (kPackRows * k + r) * field.width, src + k * field.width,
                        field.width);
          }
        }
        field_dst += kPackRows * field.bytes;
      }
    }
  }
}

void unpack_block(PackedLayout layout, const std::byte* packed_block, int r, std::byte* out) {
  const LayoutInfo info = layout_info(layout);
  const std::byte* field_src = packed_block;
  for (size_t f = 0; f < info.n_fields; ++f) {
    const Field& field = info.fields[f];
    for (size_t k = 0; k < field.bytes / field.width; ++k) {
      std::memcpy(out + field.offset + k * field.width,
                  field_src + (kPackRows * k + static_cast<size_t>(r)) * field.width, field.width);
    }
    field_src += kPackRows * field.bytes;
  }
}

WeightView PackedWeightStore::pack(WeightView w) {
  if (packed_layout(w.type, w.n_rows) == PackedLayout::none || w.data == nullptr) return w;
  if (const auto it = by_source_.find(w.data); it != by_source_.end()) {
    w.packed = it->second;
    return w;
  }
  const size_t size = static_cast<size_t>(w.n_rows) * w.row_bytes;
  auto buffer = std::make_unique_for_overwrite<std::byte[]>(size);
  pack_rows(w, {buffer.get(), size}, 0, w.n_rows / kPackRows);
  w.packed = buffer.get();
  by_source_.emplace(w.data, buffer.get());
  buffers_.push_back(std::move(buffer));
  bytes_ += size;
  return w;
}

}  // namespace cortiq::kernels
