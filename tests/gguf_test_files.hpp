// GGUF files for the tests: a byte builder for files written by hand (old
// versions, broken files), a sample file with every kind of value that
// our writer makes in memory, and copies of files with edited metadata.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"

namespace cortiq::test {

// Appends little-endian GGUF fields, for files the writer would not make.
class RawGguf {
 public:
  template <class T>
  RawGguf& put(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& i64(int64_t v) { return put(v); }
  RawGguf& str(std::string_view s) {
    u64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
    return *this;
  }
  // "GGUF", version, tensor count, metadata count.
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return u32(gguf::kMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  RawGguf& fill(size_t n, uint8_t value) {
    bytes.insert(bytes.end(), n, std::byte{value});
    return *this;
  }

  std::vector<std::byte> bytes;
};

inline std::span<const std::byte> as_bytes(const std::vector<uint8_t>& v) {
  return std::as_bytes(std::span(v));
}

// Deterministic tensor contents: byte i of tensor t is (t * 31 + i) & 0xff.
inline std::vector<std::byte> pattern_bytes(size_t n, uint32_t tensor_index) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((tensor_index * 31 + i) & 0xff);
  return out;
}

// Every value type, string arrays, nested arrays, an empty array, and
// tensors of a plain, a half and a block type.
inline void add_sample_contents(gguf::GgufWriter& w) {
  using gguf::Array;
  using gguf::ValueType;
  w.set("general.architecture", std::string("llama"));
  w.set("test.u8", uint8_t{200});
  w.set("test.i8", int8_t{-100});
  w.set("test.u16", uint16_t{60000});
  w.set("test.i16", int16_t{-30000});
  w.set("test.u32", uint32_t{4000000000u});
  w.set("test.i32", int32_t{-2000000000});
  w.set("test.f32", 1.5f);
  w.set("test.bool", true);
  w.set("test.string", std::string("h\xc3\xa9llo \"world\"\n"));
  w.set("test.u64", uint64_t{18000000000000000000ull});
  w.set("test.i64", int64_t{-9000000000000000000ll});
  w.set("test.f64", 2.25);

  Array tokens = Array::of(ValueType::string);
  std::get<std::vector<std::string>>(tokens.items) = {"<s>", "</s>", "", "\xe2\x96\x81the", "a"};
  w.set("tokenizer.ggml.tokens", tokens);

  Array scores = Array::of(ValueType::f32);
  std::get<std::vector<float>>(scores.items) = {0.0f, -1.0f, 2.5f};
  w.set("tokenizer.ggml.scores", scores);

  Array flags = Array::of(ValueType::boolean);
  std::get<std::vector<bool>>(flags.items) = {true, false, true};
  w.set("test.bools", flags);

  Array inner_a = Array::of(ValueType::i32);
  std::get<std::vector<int32_t>>(inner_a.items) = {1, -2, 3};
  Array inner_b = Array::of(ValueType::string);
  std::get<std::vector<std::string>>(inner_b.items) = {"x", "yz"};
  Array nested = Array::of(ValueType::array);
  std::get<std::vector<Array>>(nested.items) = {inner_a, inner_b, Array::of(ValueType::u64)};
  w.set("test.nested", nested);

  w.set("test.empty", Array::of(ValueType::u16));

  w.add_tensor("token_embd.weight", GgmlType::F32, {4, 3});
  w.add_tensor("blk.0.attn_q.weight", GgmlType::Q8_0, {32, 2});
  w.add_tensor("output_norm.weight", GgmlType::F16, {8});
  w.add_tensor("blk.0.cube", GgmlType::I32, {2, 2, 2, 1});
}

inline void write_pattern_data(gguf::GgufWriter& w) {
  for (size_t i = 0; i < w.n_tensors(); ++i) {
    w.write_tensor_data(pattern_bytes(w.tensor_bytes(i), static_cast<uint32_t>(i)));
  }
}

inline std::vector<std::byte> make_sample_gguf(uint64_t alignment = 32) {
  gguf::GgufWriter w(alignment);
  add_sample_contents(w);
  w.begin_in_memory();
  write_pattern_data(w);
  return w.finish_in_memory();
}

// Copies `from` to `to` with its metadata edited.
inline void rewrite_metadata(const std::filesystem::path& from, const std::filesystem::path& to,
                             const std::function<void(gguf::GgufWriter&)>& edit) {
  const gguf::GgufFile file = gguf::GgufFile::open(from);
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  edit(writer);
  for (const gguf::TensorInfo& t : file.tensors()) writer.add_tensor(t.name, t.type, t.shape);
  writer.begin(to);
  for (const gguf::TensorInfo& t : file.tensors()) writer.write_tensor_data(t.data);
  writer.finish();
}

}  // namespace cortiq::test
