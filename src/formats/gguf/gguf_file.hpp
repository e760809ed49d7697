// Reading GGUF files (versions 2 and 3, little-endian).
//
// Every count, length, offset, dimension and type id is checked against the
// file size and against overflow before it is used; a bad file gives a
// cortiq::FormatError naming the file, the field and the byte offset, never
// a crash or a huge allocation. Tensor data is not copied: each TensorInfo
// holds a view into the read-only mapping. A split model
// (NAME-00001-of-0000N.gguf with split.* keys) opens as one file from its
// first part.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.hpp"
#include "formats/gguf/gguf_value.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

struct KeyValue {
  std::string key;
  Value value;
  uint64_t offset = 0;  // where the key starts in its file (for error messages)
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous row length
  uint64_t offset = 0;         // from the start of its split's data section
  uint64_t n_bytes = 0;
  uint32_t split = 0;               // which file of a split model holds it
  std::span<const std::byte> data;  // view into the mapping, n_bytes long

  int64_t n_elements() const;
  int64_t row_length() const { return shape.empty() ? 1 : shape[0]; }
  int64_t n_rows() const;  // product of shape[1..]
};

class GgufFile {
 public:
  // Maps and parses a file; for the first part of a split model, opens and
  // joins every part. Throws FormatError / Error.
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes already in memory (tests, fuzzing). `bytes` must outlive
  // the result; `name` stands for the file name in error messages.
  // A split model's part parsed this way holds only its own tensors.
  static GgufFile parse(std::span<const std::byte> bytes, std::string name = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint32_t n_splits() const { return static_cast<uint32_t>(parts_.size()); }
  uint64_t file_size() const;  // sum over all parts

  // Metadata in file order (of the first part for split models).
  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent; FormatError naming the
  // key when it is present with a type that does not convert.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const Array* get_array(std::string_view key) const;
  // general.architecture, or "" when absent.
  std::string architecture() const;

  // Tensors of all parts in file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // MappedFile::drop_pages on the part holding `range` (nothing for parse()).
  void drop_pages(std::span<const std::byte> range) const;

 private:
  struct Part;
  GgufFile();
  void add_part_tensors(std::vector<TensorInfo> tensors, uint32_t split, const std::string& file);
  void open_other_splits(uint32_t n_splits);
  [[noreturn]] void throw_wrong_type(const KeyValue& kv, const char* expected) const;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;  // name -> index into tensors_
  std::vector<std::unique_ptr<Part>> parts_;
};

}  // namespace cortiq::gguf
