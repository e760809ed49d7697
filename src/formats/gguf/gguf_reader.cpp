#include "formats/gguf/gguf_reader.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>

#include "base/strings.hpp"
#include "formats/gguf/byte_reader.hpp"

namespace cortiq::gguf {

namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// The fewest bytes each item can occupy on disk. Counts are checked against
// these before anything is reserved, so a count can never ask for more
// memory than the file could describe.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;        // key length, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

uint64_t min_encoded_bytes(ValueType type) {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
    case ValueType::string:
      return 8;  // a string is at least its u64 length
    case ValueType::array:
      return 12;  // element type u32 + count u64
  }
  return 1;
}

std::string describe_version_problem(uint32_t version) {
  // A big-endian writer puts the small version number in the high bytes.
  if ((version & 0xFFFFu) == 0 && version != 0) return "big-endian GGUF files are not supported";
  if (version == 1) return "GGUF version 1 is not supported (versions 2 and 3 are)";
  return "unsupported GGUF version " + std::to_string(version) + " (versions 2 and 3 are)";
}

class PartParser {
 public:
  PartParser(std::span<const std::byte> bytes, std::string_view file)
      : bytes_(bytes), in_(bytes, file) {}

  ParsedPart parse() {
    read_magic_and_version();
    read_counts();
    read_metadata();
    resolve_alignment();
    read_tensor_infos();
    place_tensor_data();
    return std::move(part_);
  }

 private:
  void read_magic_and_version() {
    const uint32_t magic = in_.read<uint32_t>("magic");
    if (magic != kMagic) {
      in_.fail_at(0, "magic", strfmt("not a GGUF file (magic 0x%08x, expected \"GGUF\")", magic));
    }
    part_.version = in_.read<uint32_t>("version");
    if (part_.version != 2 && part_.version != 3) {
      in_.fail_at(4, "version", describe_version_problem(part_.version));
    }
  }

  void read_counts() {
    const uint64_t tensors_offset = in_.offset();
    n_tensors_ = in_.read<uint64_t>("tensor count");
    const uint64_t kv_offset = in_.offset();
    n_kv_ = in_.read<uint64_t>("metadata count");
    // Both are signed 64-bit in the peer; a "negative" count is corrupt.
    if (n_tensors_ > kInt64Max) in_.fail_at(tensors_offset, "tensor count", "count is negative");
    if (n_kv_ > kInt64Max) in_.fail_at(kv_offset, "metadata count", "count is negative");
    in_.require_items(n_kv_, kMinKeyValueBytes, kv_offset, "metadata count");
    in_.require_items(n_tensors_, kMinTensorInfoBytes, tensors_offset, "tensor count");
    // Each alone fits; together they must fit too (no overflow: each
    // product is at most the bytes left).
    if (n_kv_ * kMinKeyValueBytes + n_tensors_ * kMinTensorInfoBytes > in_.remaining()) {
      in_.fail_at(tensors_offset, "tensor count",
                  "tensor and metadata counts together need more bytes than the file has");
    }
  }

  void read_metadata() {
    part_.metadata.reserve(static_cast<size_t>(n_kv_));
    std::unordered_set<std::string_view> seen;
    for (uint64_t i = 0; i < n_kv_; ++i) {
      in_.set_context("metadata key " + std::to_string(i));
      const uint64_t key_offset = in_.offset();
      const std::string_view key = in_.read_string("name");
      if (key.empty()) in_.fail_at(key_offset, "name", "key is empty");
      if (!seen.insert(key).second) {
        in_.fail_at(key_offset, "name", "duplicate key '" + printable_name(key) + "'");
      }
      in_.set_context("metadata key " + std::to_string(i) + " (" + printable_name(key) + ")");
      const ValueType type = read_value_type("type");
      part_.metadata.push_back(KeyValue{std::string(key), read_value(type), key_offset});
    }
    in_.set_context("");
  }

  ValueType read_value_type(std::string_view what) {
    const uint64_t at = in_.offset();
    const uint32_t id = in_.read<uint32_t>(what);
    if (!is_valid_value_type(id)) {
      in_.fail_at(at, what, "unknown value type id " + std::to_string(id));
    }
    return static_cast<ValueType>(id);
  }

  Value read_value(ValueType type) {
    switch (type) {
      case ValueType::u8:
        return in_.read<uint8_t>("value");
      case ValueType::i8:
        return in_.read<int8_t>("value");
      case ValueType::u16:
        return in_.read<uint16_t>("value");
      case ValueType::i16:
        return in_.read<int16_t>("value");
      case ValueType::u32:
        return in_.read<uint32_t>("value");
      case ValueType::i32:
        return in_.read<int32_t>("value");
      case ValueType::f32:
        return in_.read<float>("value");
      case ValueType::boolean:
        return in_.read<uint8_t>("value") != 0;
      case ValueType::string:
        return std::string(in_.read_string("string length"));
      case ValueType::array:
        return read_array(1);
      case ValueType::u64:
        return in_.read<uint64_t>("value");
      case ValueType::i64:
        return in_.read<int64_t>("value");
      case ValueType::f64:
        return in_.read<double>("value");
    }
    in_.fail("type", "unknown value type");
  }

  Array read_array(int depth) {
    const uint64_t type_offset = in_.offset();
    const ValueType element_type = read_value_type("array element type");
    if (element_type == ValueType::array && depth >= kMaxArrayNesting) {
      in_.fail_at(type_offset, "array element type",
                  "arrays nested more than " + std::to_string(kMaxArrayNesting) + " deep");
    }
    const uint64_t count_offset = in_.offset();
    const uint64_t count = in_.read<uint64_t>("array length");
    in_.require_items(count, min_encoded_bytes(element_type), count_offset, "array length");

    Array array = Array::of(element_type);
    std::visit([&](auto& items) { read_items(items, count, depth); }, array.items);
    return array;
  }

  template <class T>
  void read_items(std::vector<T>& items, uint64_t count, int depth) {
    if constexpr (std::is_same_v<T, std::string>) {
      items.reserve(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) {
        items.emplace_back(in_.read_string("array string length"));
      }
    } else if constexpr (std::is_same_v<T, Array>) {
      // No reserve: every nesting level may claim nearly all the bytes left,
      // so reserving each level's count would hold up to kMaxArrayNesting
      // file-sized reservations at once. Growing keeps memory to what was read.
      for (uint64_t i = 0; i < count; ++i) items.push_back(read_array(depth + 1));
    } else if constexpr (std::is_same_v<T, bool>) {
      const auto raw = in_.read_bytes(count, "array data");
      items.reserve(raw.size());
      for (const std::byte b : raw) items.push_back(b != std::byte{0});
    } else {
      // Plain numbers are stored packed and little-endian: one copy.
      const auto raw = in_.read_bytes(count * sizeof(T), "array data");
      items.resize(static_cast<size_t>(count));
      if (!raw.empty()) std::memcpy(items.data(), raw.data(), raw.size());
    }
  }

  void resolve_alignment() {
    const auto it = std::find_if(part_.metadata.begin(), part_.metadata.end(),
                                 [](const KeyValue& kv) { return kv.key == "general.alignment"; });
    if (it == part_.metadata.end()) return;
    const ValueType type = it->value.type();
    const bool is_unsigned = type == ValueType::u8 || type == ValueType::u16 ||
                             type == ValueType::u32 || type == ValueType::u64;
    if (!is_unsigned) {
      in_.fail_at(it->offset, "general.alignment",
                  std::string("must be an unsigned integer, found ") + value_type_name(type));
    }
    const uint64_t alignment = *it->value.as_uint();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
      in_.fail_at(
          it->offset, "general.alignment",
          "alignment " + std::to_string(alignment) + " is not a power of two between 1 and 2^31");
    }
    part_.alignment = alignment;
  }

  void read_tensor_infos() {
    part_.tensors.reserve(static_cast<size_t>(n_tensors_));
    offset_field_offsets_.reserve(static_cast<size_t>(n_tensors_));
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      in_.set_context("tensor " + std::to_string(i));
      TensorInfo info;
      const uint64_t name_offset = in_.offset();
      info.name = std::string(in_.read_string("name"));
      if (!seen.insert(info.name).second) {
        in_.fail_at(name_offset, "name",
                    "duplicate tensor name '" + printable_name(info.name) + "'");
      }
      in_.set_context("tensor " + std::to_string(i) + " (" + printable_name(info.name) + ")");
      read_shape(info);
      read_type_and_size(info);
      offset_field_offsets_.push_back(in_.offset());
      info.offset = in_.read<uint64_t>("data offset");
      if (info.offset % part_.alignment != 0) {
        in_.fail_at(offset_field_offsets_.back(), "data offset",
                    "offset " + std::to_string(info.offset) +
                        " is not a multiple of the alignment " + std::to_string(part_.alignment));
      }
      part_.tensors.push_back(std::move(info));
    }
    in_.set_context("");
  }

  void read_shape(TensorInfo& info) {
    const uint64_t n_dims_offset = in_.offset();
    const uint32_t n_dims = in_.read<uint32_t>("n_dims");
    if (n_dims > static_cast<uint32_t>(kMaxDims)) {
      in_.fail_at(n_dims_offset, "n_dims",
                  std::to_string(n_dims) + " dimensions, at most " + std::to_string(kMaxDims));
    }
    // The product skips zero dimensions: a zero makes the element count 0
    // whatever follows, but n_rows() and row loops still multiply the rest.
    int64_t extent = 1;
    info.shape.reserve(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_offset = in_.offset();
      const std::string what = "dimension " + std::to_string(d);
      const int64_t dim = in_.read<int64_t>(what);
      if (dim < 0) in_.fail_at(dim_offset, what, "negative size " + std::to_string(dim));
      if (__builtin_mul_overflow(extent, std::max<int64_t>(dim, 1), &extent)) {
        in_.fail_at(dim_offset, what, "element count overflows 64 bits");
      }
      info.shape.push_back(dim);
    }
  }

  void read_type_and_size(TensorInfo& info) {
    const uint64_t type_offset = in_.offset();
    const uint32_t type_id = in_.read<uint32_t>("type");
    const GgmlTypeTraits* traits = ggml_type_traits(type_id);
    if (traits == nullptr) {
      in_.fail_at(type_offset, "type", "unknown tensor type id " + std::to_string(type_id));
    }
    info.type = traits->type;
    if (info.row_length() % traits->block_elems != 0) {
      in_.fail_at(type_offset, "type",
                  strfmt("row length %lld is not a multiple of the %s block size %u",
                         static_cast<long long>(info.row_length()),
                         std::string(traits->name).c_str(), traits->block_elems));
    }
    const auto n_bytes = ggml_row_bytes(info.type, static_cast<uint64_t>(info.n_elements()));
    if (!n_bytes) in_.fail_at(type_offset, "type", "tensor size in bytes overflows 64 bits");
    info.n_bytes = *n_bytes;
  }

  void place_tensor_data() {
    const uint64_t header_end = in_.offset();
    // header_end <= file size < 2^63 and alignment <= 2^31: no overflow.
    uint64_t data_offset = (header_end + part_.alignment - 1) / part_.alignment * part_.alignment;
    if (data_offset > in_.size()) {
      if (!part_.tensors.empty()) {
        in_.fail_at(header_end, "data section",
                    "starts at " + std::to_string(data_offset) + ", past the end of the file (" +
                        std::to_string(in_.size()) + " bytes)");
      }
      data_offset = in_.size();  // no tensors: the file may end right after the header
    }
    part_.data_offset = data_offset;
    const uint64_t data_size = in_.size() - data_offset;
    for (size_t i = 0; i < part_.tensors.size(); ++i) {
      TensorInfo& info = part_.tensors[i];
      if (info.offset > data_size || info.n_bytes > data_size - info.offset) {
        in_.fail_at(offset_field_offsets_[i],
                    "tensor " + std::to_string(i) + " (" + printable_name(info.name) + ") data",
                    "bytes " + std::to_string(info.offset) + " + " + std::to_string(info.n_bytes) +
                        " lie outside the data section of " + std::to_string(data_size) + " bytes");
      }
      info.data = bytes_.subspan(static_cast<size_t>(data_offset + info.offset),
                                 static_cast<size_t>(info.n_bytes));
    }
  }

  std::span<const std::byte> bytes_;
  ByteReader in_;
  ParsedPart part_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::vector<uint64_t> offset_field_offsets_;  // per tensor, for error messages
};

}  // namespace

std::string printable_name(std::string_view name) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (const char c : name.substr(0, kMaxShown)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out.append(strfmt("\\x%02x", static_cast<unsigned>(u)));
    } else {
      out.push_back(c);
    }
  }
  if (name.size() > kMaxShown) out.append("...");
  return out;
}

ParsedPart parse_part(std::span<const std::byte> bytes, std::string_view file) {
  return PartParser(bytes, file).parse();
}

}  // namespace cortiq::gguf
