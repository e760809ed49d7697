// Finding a family's tensors in a GGUF and checking them: names, shapes and
// types, with errors that name the tensor. Matrices stay in the mapped file
// (views), plus a packed copy for the integer kernels when a store is given
// (kernels/cpu/packed_weights.hpp); small vectors (norm weights, biases) are
// copied out as f32.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/weight_view.hpp"

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

class WeightBinder {
 public:
  explicit WeightBinder(const gguf::GgufFile& file, kernels::PackedWeightStore* packed = nullptr)
      : file_(file), packed_(packed) {}

  // A matrix of n_rows rows of n_cols elements (ggml shape {n_cols, n_rows}).
  kernels::WeightView matrix(std::string_view name, int64_t n_cols, int64_t n_rows) const;
  // As matrix(), but an empty view when the tensor is absent.
  kernels::WeightView optional_matrix(std::string_view name, int64_t n_cols, int64_t n_rows) const;
  // A vector of n elements as f32.
  std::vector<float> vector(std::string_view name, int64_t n) const;
  // Empty when absent.
  std::vector<float> optional_vector(std::string_view name, int64_t n) const;
  bool has(std::string_view name) const;

  // "blk.N.what"
  static std::string layer_name(int64_t layer, std::string_view what);

 private:
  const gguf::GgufFile& file_;
  kernels::PackedWeightStore* packed_;
};

}  // namespace cortiq
