#include "formats/gguf/gguf_file.hpp"

#include <algorithm>
#include <unordered_set>

#include "base/error.hpp"
#include "base/log.hpp"
#include "formats/gguf/gguf_reader.hpp"
#include "formats/gguf/gguf_split.hpp"

namespace cortiq::gguf {

// One file of the model: the mapping the tensor views point into.
struct GgufFile::Part {
  std::string path;
  MappedFile mapping;  // empty for parse(): the caller owns the bytes
  uint64_t size = 0;
};

namespace {

const KeyValue* find_key(const std::vector<KeyValue>& metadata, std::string_view key) {
  for (const KeyValue& kv : metadata) {
    if (kv.key == key) return &kv;
  }
  return nullptr;
}

// An unsigned integer key of one part; nullopt when absent, FormatError
// when present with another type or a negative value.
std::optional<uint64_t> part_uint(const ParsedPart& part, std::string_view key,
                                  const std::string& file) {
  const KeyValue* kv = find_key(part.metadata, key);
  if (kv == nullptr) return std::nullopt;
  const auto value = kv->value.as_uint();
  if (!value) {
    throw FormatError(
        file, kv->key, kv->offset,
        std::string("expected an unsigned integer, found ") + value_type_name(kv->value.type()));
  }
  return value;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (const int64_t dim : shape) n *= dim;
  return n;
}

int64_t TensorInfo::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

GgufFile::GgufFile() = default;
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
  ParsedPart parsed = parse_part(bytes, name);
  GgufFile file;
  file.path_ = name;
  file.version_ = parsed.version;
  file.alignment_ = parsed.alignment;
  file.metadata_ = std::move(parsed.metadata);
  file.add_part_tensors(std::move(parsed.tensors), 0, name);
  file.parts_.push_back(std::make_unique<Part>(Part{std::move(name), MappedFile(), bytes.size()}));
  return file;
}

void GgufFile::drop_pages(std::span<const std::byte> range) const {
  for (const auto& part : parts_) part->mapping.drop_pages(range);
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  MappedFile mapping = MappedFile::open(path);
  GgufFile file = parse(mapping.bytes(), path.string());
  file.parts_.back()->mapping = std::move(mapping);  // moving keeps the mapped address

  const auto n_splits = file.get_uint(kSplitCountKey);
  if (n_splits && *n_splits > 1) {
    if (*n_splits > UINT16_MAX) {
      throw FormatError(file.path_, kSplitCountKey,
                        find_key(file.metadata_, kSplitCountKey)->offset,
                        "split count " + std::to_string(*n_splits) + " is out of range");
    }
    file.open_other_splits(static_cast<uint32_t>(*n_splits));
  }
  return file;
}

void GgufFile::open_other_splits(uint32_t n_splits) {
  const auto first_no = get_uint(kSplitNoKey);
  if (first_no.value_or(0) != 0) {
    throw Error(path_ + ": this is part " + std::to_string(*first_no + 1) + " of a split model (" +
                std::string(kSplitNoKey) + " = " + std::to_string(*first_no) +
                "); open the first part, NAME" + split_path("", 1, n_splits));
  }
  const auto name = parse_split_path(path_);
  if (!name || name->number != 1 || name->count != n_splits) {
    throw Error(path_ + ": split.count is " + std::to_string(n_splits) +
                " but the file name does not follow NAME" + split_path("", 1, n_splits) +
                ", so the other parts cannot be found");
  }
  for (uint32_t index = 1; index < n_splits; ++index) {
    const std::string part_path = split_path(name->prefix, index + 1, n_splits);
    if (!std::filesystem::exists(part_path)) {
      throw Error(path_ + ": part " + std::to_string(index + 1) + " of " +
                  std::to_string(n_splits) + " of the split model is missing: " + part_path);
    }
    MappedFile mapping = MappedFile::open(part_path);
    ParsedPart parsed = parse_part(mapping.bytes(), part_path);
    const auto part_no = part_uint(parsed, kSplitNoKey, part_path);
    if (part_no != index) {
      throw Error(part_path + ": expected " + std::string(kSplitNoKey) + " = " +
                  std::to_string(index) + ", found " +
                  (part_no ? std::to_string(*part_no) : std::string("no such key")));
    }
    const auto part_count = part_uint(parsed, kSplitCountKey, part_path);
    if (part_count && *part_count != n_splits) {
      throw Error(part_path + ": " + std::string(kSplitCountKey) + " is " +
                  std::to_string(*part_count) + " but the first part says " +
                  std::to_string(n_splits));
    }
    add_part_tensors(std::move(parsed.tensors), index, part_path);
    const uint64_t size = mapping.size();
    parts_.push_back(std::make_unique<Part>(Part{part_path, std::move(mapping), size}));
  }
  const auto expected = get_uint(kSplitTensorsCountKey);
  if (!expected) {
    throw Error(path_ + ": split model without " + std::string(kSplitTensorsCountKey));
  }
  if (*expected != tensors_.size()) {
    throw Error(path_ + ": " + std::string(kSplitTensorsCountKey) + " is " +
                std::to_string(*expected) + " but the " + std::to_string(n_splits) +
                " parts hold " + std::to_string(tensors_.size()) + " tensors");
  }
  LOG_DEBUG("%s: opened %u parts with %zu tensors", path_.c_str(), n_splits, tensors_.size());
}

void GgufFile::add_part_tensors(std::vector<TensorInfo> tensors, uint32_t split,
                                const std::string& file) {
  tensors_.reserve(tensors_.size() + tensors.size());
  for (TensorInfo& info : tensors) {
    info.split = split;
    // Within one file the parser already refused duplicates; this catches
    // a name that appears in two parts.
    if (!tensor_index_.emplace(info.name, tensors_.size()).second) {
      throw Error(file + ": tensor '" + printable_name(info.name) +
                  "' is also in an earlier part of the split model");
    }
    tensors_.push_back(std::move(info));
  }
}

uint64_t GgufFile::file_size() const {
  uint64_t total = 0;
  for (const auto& part : parts_) total += part->size;
  return total;
}

const Value* GgufFile::find(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  return kv == nullptr ? nullptr : &kv->value;
}

void GgufFile::throw_wrong_type(const KeyValue& kv, const char* expected) const {
  throw FormatError(path_, kv.key, kv.offset,
                    std::string("expected ") + expected + ", found " +
                        value_type_name(kv.value.type()) + " " + kv.value.to_display_string(4));
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return std::nullopt;
  if (const std::string* s = kv->value.as_string()) return *s;
  throw_wrong_type(*kv, "a string");
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return std::nullopt;
  if (const auto v = kv->value.as_uint()) return v;
  throw_wrong_type(*kv, "an unsigned integer");
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return std::nullopt;
  if (const auto v = kv->value.as_int()) return v;
  throw_wrong_type(*kv, "an integer");
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return std::nullopt;
  if (const auto v = kv->value.as_double()) return v;
  throw_wrong_type(*kv, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return std::nullopt;
  if (const auto v = kv->value.as_bool()) return v;
  throw_wrong_type(*kv, "a bool");
}

const Array* GgufFile::get_array(std::string_view key) const {
  const KeyValue* kv = find_key(metadata_, key);
  if (kv == nullptr) return nullptr;
  if (const Array* a = kv->value.as_array()) return a;
  throw_wrong_type(*kv, "an array");
}

std::string GgufFile::architecture() const {
  return get_string("general.architecture").value_or("");
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace cortiq::gguf
