// libFuzzer target for the GGUF reader. Any input must either parse into a
// self-consistent file or throw cortiq::Error; anything else (a crash, a
// sanitizer report, another exception type, a huge allocation) is a bug.
// A file that parses is also written back with our writer and read again,
// and must come back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"

namespace {

using cortiq::gguf::GgufFile;
using cortiq::gguf::GgufWriter;
using cortiq::gguf::KeyValue;
using cortiq::gguf::TensorInfo;

void require(bool condition) {
  if (!condition) std::abort();
}

// Touches everything a caller might read, so the sanitizers see it.
void check_consistent(const GgufFile& file, std::span<const std::byte> input) {
  for (const KeyValue& kv : file.metadata()) {
    require(file.find(kv.key) != nullptr);
    (void)kv.value.to_display_string(4);
  }
  (void)file.architecture();
  for (const TensorInfo& t : file.tensors()) {
    require(t.data.size() == t.n_bytes);
    require(t.n_elements() >= 0 && t.row_length() >= 0 && t.n_rows() >= 0);
    if (!t.data.empty()) {
      require(t.data.data() >= input.data());
      require(t.data.data() + t.data.size() <= input.data() + input.size());
      volatile std::byte sink = t.data.front();
      sink = t.data.back();
      (void)sink;
    }
    require(file.find_tensor(t.name) == &t);
  }
}

// The most bytes a round trip may write to memory. A file may ask for any
// power-of-two alignment up to 2^31 (as llama.cpp allows); its copy then holds
// that much padding after the header and after every tensor, which the writer
// writes correctly but which would exceed the fuzzer's memory limit.
constexpr uint64_t kMaxCopyBytes = uint64_t{64} << 20;

// Writes the parsed file with our writer (when it is something the writer
// accepts) and checks the copy reads back the same.
void check_round_trip(const GgufFile& file, std::span<const std::byte> input) {
  const uint64_t paddings = file.tensors().size() + 1;
  if (file.alignment() > kMaxCopyBytes / paddings ||
      input.size() + paddings * file.alignment() > kMaxCopyBytes) {
    return;
  }
  std::vector<std::byte> copy;
  try {
    // Default-constructed: general.alignment, if the file has it, is then set
    // in its own place among the keys (a writer built with the alignment puts
    // the key first, which would reorder the copy).
    GgufWriter writer;
    for (const KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
    require(writer.alignment() == file.alignment());
    for (const TensorInfo& t : file.tensors()) writer.add_tensor(t.name, t.type, t.shape);
    writer.begin_in_memory();
    for (const TensorInfo& t : file.tensors()) writer.write_tensor_data(t.data);
    copy = writer.finish_in_memory();
  } catch (const cortiq::Error&) {
    return;  // e.g. a tensor name the peer could not hold; the reader may accept it
  }
  const GgufFile again = GgufFile::parse(copy, "round-trip");  // must not throw
  require(again.metadata().size() == file.metadata().size());
  for (size_t i = 0; i < file.metadata().size(); ++i) {
    const KeyValue& a = file.metadata()[i];
    const KeyValue& b = again.metadata()[i];
    require(a.key == b.key);
    if (a.key == "general.alignment") {
      // Read from any unsigned type, always written as u32 (the peer's type).
      require(a.value.as_uint() == b.value.as_uint());
      continue;
    }
    require(a.value.type() == b.value.type());
    require(a.value.to_display_string(SIZE_MAX) == b.value.to_display_string(SIZE_MAX));
  }
  require(again.tensors().size() == file.tensors().size());
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const TensorInfo& a = file.tensors()[i];
    const TensorInfo& b = again.tensors()[i];
    require(a.name == b.name && a.type == b.type && a.shape == b.shape);
    require(std::equal(a.data.begin(), a.data.end(), b.data.begin(), b.data.end()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  try {
    const GgufFile file = GgufFile::parse(input, "fuzz.gguf");
    check_consistent(file, input);
    check_round_trip(file, input);
  } catch (const cortiq::Error&) {
    // A refusal with a message is the expected outcome for most inputs.
  }
  return 0;
}
