// Finding a family's tensors in a GGUF and checking them: names, shapes and
// types, with errors that name the tensor. Matrices stay in the mapped file
// (views), plus a packed copy for the integer kernels when a store is given
// (kernels/cpu/packed_weights.hpp); small vectors (norm weights, biases) are
// copied out as f32.
//
// The binder remembers every tensor it bound: a file is honoured completely
// or refused, so once the family has bound its weights, check_all_used()
// fails naming the first tensor nobody read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "model/tensor_table.hpp"

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

class WeightBinder final : public TensorVisitor {
 public:
  explicit WeightBinder(const gguf::GgufFile& file, kernels::PackedWeightStore* packed = nullptr)
      : file_(file), packed_(packed) {}

  const gguf::GgufFile& file() const { return file_; }
  // Where matrices are packed from now on (the model's own store).
  void pack_into(kernels::PackedWeightStore* packed) { packed_ = packed; }

  // A matrix of n_rows rows of n_cols elements (ggml shape {n_cols, n_rows}).
  kernels::WeightView matrix(std::string_view name, int64_t n_cols, int64_t n_rows) const;
  // As matrix(), but an empty view when the tensor is absent.
  kernels::WeightView optional_matrix(std::string_view name, int64_t n_cols, int64_t n_rows) const;
  // A vector of n elements as f32.
  std::vector<float> vector(std::string_view name, int64_t n) const;
  // Empty when absent.
  std::vector<float> optional_vector(std::string_view name, int64_t n) const;
  bool has(std::string_view name) const;

  // TensorVisitor: the same, into the family's fields.
  void matrix(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override;
  void router(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override {
    matrix(view, name, n_cols, n_rows, required);
  }
  void experts(std::vector<kernels::WeightView>& views, const std::string& name, int64_t n_cols,
               int64_t n_rows, int64_t n_expert, bool required, int64_t n_parts) override;
  void vector(std::vector<float>& values, const std::string& name, int64_t n, TensorKind kind,
              bool required) override;
  void table(std::vector<float>& values, const std::string& name, int64_t n_cols, int64_t n_rows,
             TensorKind kind, bool required) override;
  void shaped(std::vector<float>& values, const std::string& name,
              const std::vector<int64_t>& shape, TensorKind kind, bool required) override;
  void scale(float& value, const std::string& name) override;
  void without_effect(const std::string& name, int64_t n, TensorKind kind) override;
  bool has(const std::string& name, bool /*written*/) override { return has(name); }
  int64_t rows_of(const std::string& name, int64_t /*written*/) override;

  // Throws cortiq::Error naming the first tensor of the file that was not
  // bound (llama.cpp refuses such files too: "wrong number of tensors"), and
  // logs once how many bound tensors have no effect, like llama.cpp.
  void check_all_used(std::string_view arch) const;

  // "blk.N.what"
  static std::string layer_name(int64_t layer, std::string_view what) {
    return layer_tensor_name(layer, what);
  }

 private:
  const gguf::GgufFile& file_;
  kernels::PackedWeightStore* packed_;
  mutable std::unordered_set<std::string> used_;
  std::vector<std::string> without_effect_;  // present, read, applied nowhere
};

}  // namespace cortiq
