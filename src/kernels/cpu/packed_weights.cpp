#include "kernels/cpu/packed_weights.hpp"

#include <cstring>

#include "base/error.hpp"

namespace cortiq::kernels {

namespace {

constexpr size_t kScaleBytes = 2;

struct LayoutInfo {
  size_t block_bytes;  // one row's block in the file: fp16 scale + codes
  size_t code_bytes;
};

LayoutInfo layout_info(PackedLayout layout) {
  switch (layout) {
    case PackedLayout::q4_0x8:
      return {18, 16};
    case PackedLayout::q8_0x8:
      return {34, 32};
    case PackedLayout::none:
      break;
  }
  return {0, 0};
}

}  // namespace

PackedLayout packed_layout(GgmlType type, int64_t n_rows) {
  if (n_rows <= 0 || n_rows % kPackRows != 0) return PackedLayout::none;
  switch (type) {
    case GgmlType::Q4_0:
      return PackedLayout::q4_0x8;
    case GgmlType::Q8_0:
      return PackedLayout::q8_0x8;
    default:
      return PackedLayout::none;
  }
}

size_t packed_block_bytes(PackedLayout layout) {
  return kPackRows * layout_info(layout).block_bytes;
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
      for (int64_t r = 0; r < kPackRows; ++r) {
        const std::byte* src = w.row(g * kPackRows + r).data() + b * info.block_bytes;
        std::memcpy(dst + r * kScaleBytes, src, kScaleBytes);
        for (size_t k = 0; k < info.code_bytes / 4; ++k) {
          std::memcpy(dst + kPackRows * kScaleBytes + 32 * k + 4 * r, src + kScaleBytes + 4 * k, 4);
        }
      }
    }
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
