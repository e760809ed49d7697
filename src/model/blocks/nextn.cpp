#include "model/blocks/nextn.hpp"

#include "model/tensor_table.hpp"

namespace cortiq {

void NextnTensors::visit(TensorVisitor& v, const ModelHParams& hp, int64_t il, bool nemotron) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
  v.matrix(eh_proj, name("nextn.eh_proj.weight"), 2 * hp.n_embd, hp.n_embd);
  v.vector(enorm, name("nextn.enorm.weight"), hp.n_embd, TensorKind::norm);
  v.vector(hnorm, name("nextn.hnorm.weight"), hp.n_embd, TensorKind::norm);
  if (!nemotron) {
    v.matrix(embed_tokens, name("nextn.embed_tokens.weight"), hp.n_embd, hp.n_vocab,
             /*required=*/false);
    v.matrix(shared_head_head, name("nextn.shared_head_head.weight"), hp.n_embd, hp.n_vocab,
             /*required=*/false);
  }
  v.vector(shared_head_norm, name("nextn.shared_head_norm.weight"), hp.n_embd, TensorKind::norm,
           /*required=*/nemotron);
}

void visit_mtp_layers(
    TensorVisitor& v, const ModelHParams& hp, bool required,
    const std::function<void(TensorVisitor&, const ModelHParams& all, int64_t il)>& visit_layer) {
  if (hp.mtp_layers.empty()) return;
  if (!required &&
      !v.has(layer_tensor_name(hp.n_layer, "nextn.eh_proj.weight"), /*written=*/true)) {
    return;
  }
  const ModelHParams all = hp.with_mtp_layers();
  ScalelessVisitor no_scales(v);
  for (int64_t il = hp.n_layer; il < std::ssize(all.layers); ++il) visit_layer(no_scales, all, il);
}

}  // namespace cortiq
