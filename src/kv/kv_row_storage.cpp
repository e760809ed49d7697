#include "kv/kv_row_storage.hpp"

#include <cstring>

#include "kernels/cpu/convert.hpp"

namespace cortiq {

void HostKvRows::store_row(KvSide side, size_t offset, std::span<const float> row, KvType type) {
  std::byte* dst = bytes(side).data() + offset;
  if (type == KvType::f32) {
    std::memcpy(dst, row.data(), row.size_bytes());
  } else {
    kernels::fp32_to_fp16_row(row, {reinterpret_cast<uint16_t*>(dst), row.size()});
  }
}

void HostKvRows::copy(KvSide side, size_t from_offset, size_t to_offset, size_t n) {
  std::byte* data = bytes(side).data();
  std::memmove(data + to_offset, data + from_offset, n);
}

}  // namespace cortiq
