#include "model/blocks/norm.hpp"

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"

namespace cortiq {

void Norm::visit(TensorVisitor& v, const std::string& name, int64_t width, NormKind norm_kind,
                 float norm_eps, bool bias_required) {
  kind = norm_kind;
  eps = norm_eps;
  this->width = width;
  if (kind == NormKind::plain_layer) return;
  v.vector(weight, name + ".weight", width, TensorKind::norm);
  if (kind == NormKind::layer || kind == NormKind::rms_with_bias)
    v.vector(bias, name + ".bias", width, TensorKind::bias, bias_required);
}

void Norm::apply(std::span<const float> x, std::span<float> out) const {
  if (kind == NormKind::rms || kind == NormKind::rms_with_bias) {
    kernels::rms_norm_rows(x, weight, eps, out, weight.size());
    if (!bias.empty()) kernels::add_bias_rows(out.first(x.size()), bias);
  } else if (kind == NormKind::plain_layer) {
    kernels::layer_norm_rows(x, {}, {}, eps, out, static_cast<size_t>(width));
  } else {
    kernels::layer_norm_rows(x, weight, bias, eps, out, weight.size());
  }
}

}  // namespace cortiq
