// Writing GGUF v3 files: metadata, tensor infos, and tensor data at the
// required alignment. Data is streamed tensor by tensor (a quantized 70B
// model never has to sit in memory) into a temporary file that is renamed
// into place only when complete, so a failed write leaves no half file.
//
//   GgufWriter w;
//   w.set("general.architecture", std::string("llama"));
//   w.add_tensor("token_embd.weight", GgmlType::F32, {n_embd, n_vocab});
//   w.begin("out.gguf");
//   w.write_tensor_data(bytes);  // once per tensor, in the order added
//   w.finish();
//
// Files open in the peer (llama.cpp) unchanged as long as they hold no
// arrays of arrays: those are valid GGUF and we read them, but the peer
// refuses them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/gguf/gguf_value.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Adds or replaces (in place, keeping the order) a metadata key.
  // general.alignment is written automatically when alignment != 32;
  // setting it (any unsigned integer type, stored as u32) changes the
  // alignment, so metadata copied from another file keeps its alignment.
  // Metadata and tensors are fixed once begin() has been called.
  void set(const std::string& key, Value value);
  void remove(const std::string& key);
  const Value* find(const std::string& key) const;

  // Declares a tensor; its data comes later through write_tensor_data.
  // Throws when the shape is not a whole number of blocks of the type.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape);
  size_t n_tensors() const;
  // Expected data size of tensor i.
  uint64_t tensor_bytes(size_t index) const;

  // Writes everything up to the first tensor's data into PATH.tmp.
  void begin(const std::filesystem::path& path);
  // Appends the next tensor's data (exactly tensor_bytes(i) bytes) and pads.
  void write_tensor_data(std::span<const std::byte> data);
  // Checks every tensor was written, flushes, closes and renames into place.
  void finish();

  // The same stream into memory instead of a file (tests, fuzzing seeds):
  // begin_in_memory(), write_tensor_data() per tensor, finish_in_memory().
  void begin_in_memory();
  std::vector<std::byte> finish_in_memory();

  uint64_t alignment() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cortiq::gguf
