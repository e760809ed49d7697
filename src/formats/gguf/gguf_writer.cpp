#include "formats/gguf/gguf_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_reader.hpp"

namespace cortiq::gguf {

namespace {

constexpr uint32_t kWrittenVersion = 3;
constexpr std::string_view kAlignmentKey = "general.alignment";
// The peer stores tensor names in char[64] with the terminating NUL.
constexpr size_t kMaxTensorNameBytes = 63;

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer stores numbers in host order");

// Appends little-endian fields to a byte buffer.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& out) : out_(out) {}

  template <class T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }

 private:
  std::vector<std::byte>& out_;
};

void put_array_body(ByteWriter& w, const Array& array);

template <class T>
void put_items(ByteWriter& w, const std::vector<T>& items) {
  if constexpr (std::is_same_v<T, std::string>) {
    for (const std::string& s : items) w.put_string(s);
  } else if constexpr (std::is_same_v<T, Array>) {
    for (const Array& a : items) put_array_body(w, a);
  } else if constexpr (std::is_same_v<T, bool>) {
    for (const bool b : items) w.put<uint8_t>(b ? 1 : 0);
  } else {
    w.put_bytes(items.data(), items.size() * sizeof(T));
  }
}

// Element type, count, elements: how an array follows its "array" type id,
// and how each element of an array of arrays is stored.
void put_array_body(ByteWriter& w, const Array& array) {
  w.put<uint32_t>(static_cast<uint32_t>(array.element_type));
  w.put<uint64_t>(array.size());
  std::visit([&](const auto& items) { put_items(w, items); }, array.items);
}

void put_value(ByteWriter& w, const Value& value) {
  w.put<uint32_t>(static_cast<uint32_t>(value.type()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          w.put_string(v);
        } else if constexpr (std::is_same_v<T, Array>) {
          put_array_body(w, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          w.put<uint8_t>(v ? 1 : 0);
        } else {
          w.put(v);
        }
      },
      value.storage());
}

// An Array whose element_type disagrees with its vector would be written as
// one type and read as another; refuse it before anything is written.
void check_array(const std::string& key, const Array& array, int depth) {
  if (static_cast<size_t>(array.element_type) != array.items.index()) {
    throw Error("GGUF metadata " + key + ": array element type " +
                value_type_name(array.element_type) + " does not match its items");
  }
  if (const auto* nested = array.as<Array>()) {
    if (depth >= kMaxArrayNesting) {
      throw Error("GGUF metadata " + key + ": arrays nested more than " +
                  std::to_string(kMaxArrayNesting) + " deep");
    }
    for (const Array& a : *nested) check_array(key, a, depth + 1);
  }
}

uint64_t checked_alignment(uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
    throw Error("GGUF alignment " + std::to_string(alignment) +
                " is not a power of two between 1 and 2^31");
  }
  return alignment;
}

uint64_t padding_for(uint64_t size, uint64_t alignment) {
  return (alignment - size % alignment) % alignment;
}

// Where the bytes go: a temporary file renamed into place, or memory.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(std::span<const std::byte> bytes) = 0;
  void write_zeros(uint64_t n) {
    static constexpr std::byte kZeros[256] = {};
    while (n > 0) {
      const uint64_t chunk = std::min<uint64_t>(n, sizeof(kZeros));
      write({kZeros, static_cast<size_t>(chunk)});
      n -= chunk;
    }
  }
};

class FileSink final : public Sink {
 public:
  explicit FileSink(const std::filesystem::path& path)
      : path_(path), temp_path_(path.string() + ".tmp") {
    file_ = std::fopen(temp_path_.c_str(), "wb");
    if (file_ == nullptr) fail("create");
  }
  ~FileSink() override {
    // Still open here means the write did not complete: leave no half file.
    if (file_ != nullptr) {
      std::fclose(file_);
      std::error_code ignored;
      std::filesystem::remove(temp_path_, ignored);
    }
  }

  void write(std::span<const std::byte> bytes) override {
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      fail("write");
    }
  }

  void commit() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) fail("flush");
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) {
      std::error_code ignored;
      std::filesystem::remove(temp_path_, ignored);
      fail("close");
    }
    std::error_code ec;
    std::filesystem::rename(temp_path_, path_, ec);
    if (ec) {
      std::filesystem::remove(temp_path_, ec);
      throw Error(path_.string() + ": cannot rename " + temp_path_ +
                  " into place: " + ec.message());
    }
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw Error(temp_path_ + ": cannot " + what + ": " + std::strerror(errno));
  }

  std::filesystem::path path_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
};

class MemorySink final : public Sink {
 public:
  void write(std::span<const std::byte> bytes) override {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

struct PlannedTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> shape;
  uint64_t n_bytes = 0;
};

}  // namespace

struct GgufWriter::Impl {
  enum class State { defining, writing, finished };

  uint64_t alignment = kDefaultAlignment;
  std::vector<KeyValue> metadata;
  // key -> index into metadata: copying a file's metadata calls set() once
  // per key, which a linear search made quadratic in the number of keys.
  std::unordered_map<std::string, size_t> key_index;
  std::vector<PlannedTensor> tensors;
  std::unordered_set<std::string> tensor_names;

  State state = State::defining;
  std::unique_ptr<Sink> sink;
  size_t next_tensor = 0;

  void require_state(State wanted, const char* action) const {
    if (state == wanted) return;
    static constexpr const char* kWhen[] = {"before begin()", "between begin() and finish()",
                                            "after finish()"};
    throw Error(std::string("GgufWriter: cannot ") + action + " " + kWhen[static_cast<int>(state)]);
  }

  KeyValue* find(const std::string& key) {
    const auto it = key_index.find(key);
    return it == key_index.end() ? nullptr : &metadata[it->second];
  }

  void append(std::string key, Value value) {
    key_index.emplace(key, metadata.size());
    metadata.push_back({std::move(key), std::move(value)});
  }

  void set_alignment_from(const Value& value) {
    const ValueType t = value.type();
    const bool is_unsigned =
        t == ValueType::u8 || t == ValueType::u16 || t == ValueType::u32 || t == ValueType::u64;
    if (!is_unsigned) {
      throw Error(std::string("general.alignment must be an unsigned integer, not ") +
                  value_type_name(t));
    }
    alignment = checked_alignment(*value.as_uint());
  }

  std::vector<std::byte> header() const {
    std::vector<std::byte> out;
    ByteWriter w(out);
    w.put<uint32_t>(kMagic);
    w.put<uint32_t>(kWrittenVersion);
    w.put<uint64_t>(tensors.size());
    w.put<uint64_t>(metadata.size());
    for (const KeyValue& kv : metadata) {
      w.put_string(kv.key);
      put_value(w, kv.value);
    }
    uint64_t offset = 0;
    for (const PlannedTensor& t : tensors) {
      w.put_string(t.name);
      w.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
      for (const int64_t dim : t.shape) w.put<int64_t>(dim);
      w.put<uint32_t>(static_cast<uint32_t>(t.type));
      w.put<uint64_t>(offset);
      offset += t.n_bytes + padding_for(t.n_bytes, alignment);
    }
    return out;
  }

  void begin(std::unique_ptr<Sink> new_sink) {
    require_state(State::defining, "begin writing");
    const std::vector<std::byte> bytes = header();
    new_sink->write(bytes);
    new_sink->write_zeros(padding_for(bytes.size(), alignment));
    sink = std::move(new_sink);
    state = State::writing;
  }

  void check_all_written() const {
    if (next_tensor < tensors.size()) {
      throw Error("GgufWriter: no data was written for tensor '" + tensors[next_tensor].name +
                  "' (" + std::to_string(next_tensor + 1) + " of " +
                  std::to_string(tensors.size()) + ")");
    }
  }
};

GgufWriter::GgufWriter(uint64_t alignment) : impl_(std::make_unique<Impl>()) {
  impl_->alignment = checked_alignment(alignment);
  if (alignment != kDefaultAlignment) {
    impl_->append(std::string(kAlignmentKey), static_cast<uint32_t>(alignment));
  }
}

GgufWriter::~GgufWriter() = default;

void GgufWriter::set(const std::string& key, Value value) {
  impl_->require_state(Impl::State::defining, "set metadata");
  if (key.empty()) throw Error("GgufWriter: metadata key is empty");
  if (const Array* array = value.as_array()) check_array(key, *array, 1);
  if (key == kAlignmentKey) {
    impl_->set_alignment_from(value);
    value = static_cast<uint32_t>(impl_->alignment);  // the peer reads only u32
  }
  if (KeyValue* existing = impl_->find(key)) {
    existing->value = std::move(value);
  } else {
    impl_->append(key, std::move(value));
  }
}

void GgufWriter::remove(const std::string& key) {
  impl_->require_state(Impl::State::defining, "remove metadata");
  if (const auto it = impl_->key_index.find(key); it != impl_->key_index.end()) {
    const size_t removed = it->second;
    impl_->key_index.erase(it);
    impl_->metadata.erase(impl_->metadata.begin() + static_cast<std::ptrdiff_t>(removed));
    // The keys after it moved down by one.
    for (auto& [name, index] : impl_->key_index) {
      if (index > removed) --index;
    }
  }
  if (key == kAlignmentKey) impl_->alignment = kDefaultAlignment;
}

const Value* GgufWriter::find(const std::string& key) const {
  const KeyValue* kv = impl_->find(key);
  return kv == nullptr ? nullptr : &kv->value;
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape) {
  impl_->require_state(Impl::State::defining, "add tensors");
  const std::string what = "GgufWriter: tensor '" + name + "'";
  if (name.empty()) throw Error("GgufWriter: tensor name is empty");
  if (name.size() > kMaxTensorNameBytes) {
    throw Error(what + ": name longer than " + std::to_string(kMaxTensorNameBytes) + " bytes");
  }
  if (impl_->tensor_names.contains(name)) throw Error(what + " was already added");
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (traits == nullptr)
    throw Error(what + ": invalid type id " + std::to_string(static_cast<uint32_t>(type)));
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    throw Error(what + ": " + std::to_string(shape.size()) + " dimensions, at most " +
                std::to_string(kMaxDims));
  }
  // As in the reader: zero dimensions are skipped in the overflow check, so
  // every product of dimensions (n_rows() too) fits in 64 bits.
  int64_t n_elements = 1;
  int64_t extent = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) throw Error(what + ": negative dimension " + std::to_string(dim));
    if (__builtin_mul_overflow(extent, std::max<int64_t>(dim, 1), &extent)) {
      throw Error(what + ": element count overflows");
    }
    n_elements *= dim;  // no overflow: |n_elements| <= extent
  }
  const int64_t row_length = shape.empty() ? 1 : shape[0];
  if (row_length % traits->block_elems != 0) {
    throw Error(what + ": row length " + std::to_string(row_length) + " is not a multiple of the " +
                std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
  }
  const auto n_bytes = ggml_row_bytes(type, static_cast<uint64_t>(n_elements));
  if (!n_bytes) throw Error(what + ": size in bytes overflows");
  impl_->tensor_names.insert(name);
  impl_->tensors.push_back({name, type, std::move(shape), *n_bytes});
}

size_t GgufWriter::n_tensors() const {
  return impl_->tensors.size();
}

uint64_t GgufWriter::tensor_bytes(size_t index) const {
  if (index >= impl_->tensors.size()) {
    throw Error("GgufWriter: tensor index " + std::to_string(index) + " out of range (" +
                std::to_string(impl_->tensors.size()) + " tensors)");
  }
  return impl_->tensors[index].n_bytes;
}

uint64_t GgufWriter::alignment() const {
  return impl_->alignment;
}

void GgufWriter::begin(const std::filesystem::path& path) {
  impl_->require_state(Impl::State::defining, "begin writing");
  impl_->begin(std::make_unique<FileSink>(path));
}

void GgufWriter::begin_in_memory() {
  impl_->begin(std::make_unique<MemorySink>());
}

void GgufWriter::write_tensor_data(std::span<const std::byte> data) {
  impl_->require_state(Impl::State::writing, "write tensor data");
  if (impl_->next_tensor >= impl_->tensors.size()) {
    throw Error("GgufWriter: all " + std::to_string(impl_->tensors.size()) +
                " tensors were already written");
  }
  const PlannedTensor& tensor = impl_->tensors[impl_->next_tensor];
  if (data.size() != tensor.n_bytes) {
    throw Error("GgufWriter: tensor '" + tensor.name + "' got " + std::to_string(data.size()) +
                " bytes of data, expected " + std::to_string(tensor.n_bytes));
  }
  impl_->sink->write(data);
  impl_->sink->write_zeros(padding_for(tensor.n_bytes, impl_->alignment));
  ++impl_->next_tensor;
}

void GgufWriter::finish() {
  impl_->require_state(Impl::State::writing, "finish");
  auto* file = dynamic_cast<FileSink*>(impl_->sink.get());
  if (file == nullptr) throw Error("GgufWriter: finish() ends a file; use finish_in_memory()");
  impl_->check_all_written();
  file->commit();
  impl_->state = Impl::State::finished;
}

std::vector<std::byte> GgufWriter::finish_in_memory() {
  impl_->require_state(Impl::State::writing, "finish");
  auto* memory = dynamic_cast<MemorySink*>(impl_->sink.get());
  if (memory == nullptr) throw Error("GgufWriter: finish_in_memory() needs begin_in_memory()");
  impl_->check_all_written();
  impl_->state = Impl::State::finished;
  return memory->take();
}

}  // namespace cortiq::gguf
