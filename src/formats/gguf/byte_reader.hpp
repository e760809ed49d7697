// A bounds-checked little-endian cursor over bytes of an untrusted file.
// Every read first compares its size with the bytes left, so a bad length
// or count becomes a FormatError (file, field, offset) instead of a read
// past the end. Field names are built only when something is wrong: the
// caller sets a context ("key 3 (general.name)") once per item and each
// read names just what it reads ("string length").
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "base/error.hpp"

namespace cortiq::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields as they are");

class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, std::string_view file)
      : bytes_(bytes), file_(file) {}

  uint64_t offset() const { return offset_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - offset_; }
  std::string_view file() const { return file_; }

  // Names the item being read (a key, a tensor) in later error messages.
  void set_context(std::string context) { context_ = std::move(context); }

  template <class T>
  T read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    require_bytes(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  // `n` raw bytes as a view into the input; no copy.
  std::span<const std::byte> read_bytes(uint64_t n, std::string_view what) {
    require_bytes(n, what);
    const auto view = bytes_.subspan(static_cast<size_t>(offset_), static_cast<size_t>(n));
    offset_ += n;
    return view;
  }

  // A GGUF string: u64 length, then that many bytes (not NUL-terminated).
  std::string_view read_string(std::string_view what) {
    const uint64_t start = offset_;
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail_at(start, what,
              "string length " + std::to_string(length) + " exceeds the " +
                  std::to_string(remaining()) + " bytes left in the file");
    }
    const auto view = read_bytes(length, what);
    return {reinterpret_cast<const char*>(view.data()), view.size()};
  }

  // Throws unless `count` items of at least `min_item_bytes` each could
  // still fit in the file: the check that comes before any reserve().
  void require_items(uint64_t count, uint64_t min_item_bytes, uint64_t count_offset,
                     std::string_view what) const {
    if (min_item_bytes != 0 && count > remaining() / min_item_bytes) {
      fail_at(count_offset, what,
              "count " + std::to_string(count) + " needs at least " +
                  std::to_string(min_item_bytes) + " bytes per item but only " +
                  std::to_string(remaining()) + " bytes are left in the file");
    }
  }

  [[noreturn]] void fail(std::string_view what, std::string_view problem) const {
    fail_at(offset_, what, problem);
  }
  [[noreturn]] void fail_at(uint64_t offset, std::string_view what,
                            std::string_view problem) const {
    throw FormatError(file_, field_name(what), offset, problem);
  }

 private:
  void require_bytes(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail(what, "needs " + std::to_string(n) + " bytes but the file ends after " +
                     std::to_string(remaining()));
    }
  }

  std::string field_name(std::string_view what) const {
    if (context_.empty()) return std::string(what);
    std::string name = context_;
    if (!what.empty()) name.append(" ").append(what);
    return name;
  }

  std::span<const std::byte> bytes_;
  std::string_view file_;
  std::string context_;
  uint64_t offset_ = 0;
};

}  // namespace cortiq::gguf
