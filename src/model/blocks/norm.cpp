#include "model/blocks/norm.hpp"

#include "model/forward_buffers.hpp"

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

void Norm::apply(ForwardContext& ctx, ConstTensor x, Tensor out) const {
  if (kind == NormKind::rms || kind == NormKind::rms_with_bias) {
    ctx.backend.rms_norm_rows(x, weight, eps, out, weight.size());
    if (!bias.empty()) ctx.backend.add_bias_rows(out.first(x.size()), bias);
  } else if (kind == NormKind::plain_layer) {
    ctx.backend.layer_norm_rows(x, {}, {}, eps, out, static_cast<size_t>(width));
  } else {
    ctx.backend.layer_norm_rows(x, weight, bias, eps, out, weight.size());
  }
}

}  // namespace cortiq
