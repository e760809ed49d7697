// Deterministic random-weight models (`cortiq gen-model`): the exact tensor
// layout of a real architecture, filled with seeded random numbers, for
// tests and benchmarks that need a model of a given shape but not a trained
// one.
//
// The generator: each tensor has its own stream, seeded from the model seed
// and a hash of the tensor's name (tensor_seed), so a tensor's values do not
// depend on which other tensors exist or their order. The stream is
// SplitMix64, turned into standard normal samples by Box-Muller in double
// precision and rounded to float:
//   weight matrices  normal(0, 1/sqrt(row_length))  (row_length = fan-in, so
//                    a product with a unit-RMS input has unit RMS)
//   norm weights     1 + normal(0, 0.02)
//   biases           normal(0, 0.02)
//   scales           1 + normal(0, 0.25)  (one value: a visible but tame factor)
// Matrices are then quantized to the requested type (1-D tensors stay F32).
// The same options give a byte-identical file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model/gen_model/arch_spec.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq {

inline constexpr double kRandomNormStd = 0.02;
inline constexpr double kRandomBiasStd = 0.02;
inline constexpr double kRandomScaleStd = 0.25;

struct RandomModelOptions {
  const Family* family = nullptr;
  ModelGeometry geometry;
  // The optional tensors to write: a converted checkpoint's, or all of them.
  OptionalTensors optional = OptionalTensors::converted;
  GgmlType weight_type = GgmlType::F32;
  uint64_t seed = 1;
  // A GGUF whose tokenizer.* keys are copied; empty: the built-in vocabulary.
  std::filesystem::path vocab_from;
  // tokenizer.chat_template to store (replacing one copied with the vocab).
  std::string chat_template;
  std::string name;  // general.name; empty: "cortiq-random-ARCH"
};

struct RandomModelSummary {
  size_t n_tensors = 0;
  uint64_t n_parameters = 0;
  uint64_t file_bytes = 0;
  int64_t n_vocab = 0;
  size_t n_fallbacks = 0;  // matrices whose rows do not fit the requested type's blocks
};

// The seed of one tensor's stream.
uint64_t tensor_seed(uint64_t model_seed, std::string_view tensor_name);
// The float values of one tensor (before quantization).
std::vector<float> random_tensor_values(const TensorSpec& spec, uint64_t model_seed);

// Writes the model; throws cortiq::Error for bad options.
RandomModelSummary write_random_model(const RandomModelOptions& options,
                                      const std::filesystem::path& output);

}  // namespace cortiq
