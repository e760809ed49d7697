// A normalisation with its weights, as a family places it: RMS norm
// (weight) or layer norm (weight and bias), over rows of its width.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/tensor.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

struct ForwardContext;

// rms_with_bias: an RMS norm, then a bias added (llama.cpp's build_norm
// given LLM_NORM_RMS and a bias: PhiMoE).
// layer_no_bias: a layer norm whose file has no bias (Command R).
// plain_layer: a layer norm without weight or bias (OLMo's non-parametric
// norm); it reads no tensors.
enum class NormKind : uint8_t { rms, rms_with_bias, layer, layer_no_bias, plain_layer };

struct Norm {
  NormKind kind = NormKind::rms;
  float eps = 1e-5f;
  std::vector<float> weight;
  std::vector<float> bias;  // layer norm, rms_with_bias
  int64_t width = 0;        // the rows' width (what plain_layer normalises over)

  // NAME.weight, and NAME.bias for a layer norm or rms_with_bias (required
  // unless the family's files may lack it).
  void visit(TensorVisitor& v, const std::string& name, int64_t width, NormKind norm_kind,
             float norm_eps, bool bias_required = true);
  // out = norm(x) row by row, by the pass's backend; out may alias x.
  void apply(ForwardContext& ctx, ConstTensor x, Tensor out) const;
};

}  // namespace cortiq
