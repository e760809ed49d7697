// Converting a whole GGUF model to another weight type (`cortiq quantize`).
//
// The metadata is copied (split.* keys dropped; general.file_type and
// general.quantization_version set), every tensor gets the type chosen by
// quant_recipe.hpp, and the result is streamed tensor by tensor through
// GgufWriter (temporary file, renamed when complete). A tensor that changes
// type is dequantized to float row by row and quantized again, rows spread
// over a ThreadPool; a tensor that keeps its type is copied byte for byte.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/ggml_type.hpp"
#include "quant/quant_recipe.hpp"

namespace cortiq {

namespace gguf {
class GgufFile;
}

// The GGML_QNT_VERSION written to general.quantization_version.
inline constexpr uint32_t kQuantizationVersion = 2;

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;
  GgmlType from = GgmlType::F32;
  GgmlType to = GgmlType::F32;
  GgmlType wanted = GgmlType::F32;  // the recipe's choice before the block-size fallback
  bool fell_back() const { return wanted != to; }
  bool converts() const { return from != to; }
};

// Facts the mixture rules need, from ARCH.block_count, ARCH.attention.*.
ModelShape model_shape_of(const gguf::GgufFile& model);

// What quantize_model would do with each tensor, in file order.
std::vector<TensorPlan> plan_quantization(const gguf::GgufFile& model, const QuantRecipe& recipe,
                                          bool pure);

struct QuantizeProgress {
  size_t tensors_done = 0;
  size_t tensors_total = 0;
  uint64_t bytes_done = 0;  // input tensor bytes processed
  uint64_t bytes_total = 0;
  double seconds = 0;
  std::string_view tensor;  // the tensor being worked on
};

struct QuantizeOptions {
  bool pure = false;
  int n_threads = 0;  // 0: one per hardware thread
  // Called from the calling thread after each chunk of work; may be empty.
  std::function<void(const QuantizeProgress&)> on_progress;
};

struct QuantizeSummary {
  uint64_t input_bytes = 0;   // size of the input file(s)
  uint64_t output_bytes = 0;  // size of the written file
  size_t n_tensors = 0;
  size_t n_converted = 0;    // tensors whose type changed
  size_t n_fallbacks = 0;    // tensors that could not take the recipe's type
  size_t n_requantized = 0;  // quantized inputs that were quantized again
  double seconds = 0;
};

// Throws cortiq::Error (FormatError for bad input, "unsupported weight type
// T in tensor NAME" for a tensor that would need a type we cannot decode).
QuantizeSummary quantize_model(const std::filesystem::path& input,
                               const std::filesystem::path& output, const QuantRecipe& recipe,
                               const QuantizeOptions& options);

}  // namespace cortiq
