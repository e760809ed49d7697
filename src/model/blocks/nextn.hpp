// The extra tensors of a multi-token-prediction layer (llama.cpp's
// `blk.N.nextn.*`, N >= the trunk's layer count: GLM-4.5, DeepSeek V3,
// Ling 2). Such a layer predicts the token after next from the trunk's
// last hidden state h and the next token's embedding e:
//
//   x = eh_proj · [enorm(e) ; hnorm(h)]   then a decoder layer, then
//   logits = (shared_head_head or output) · (shared_head_norm or output_norm)(x)
//
// llama.cpp runs it only as a speculative draft; decoding without one it
// loads nothing of it but checks the file has it. Cortiq binds and checks
// the tensors (Family::mtp_layers); GLM-4.5's first MTP layer drafts
// (DecoderModel::forward_mtp, MtpDrafter).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;

struct NextnTensors {
  kernels::WeightView eh_proj;           // [2 n_embd -> n_embd]
  std::vector<float> enorm, hnorm;       // RMS norm weights of e and h
  kernels::WeightView embed_tokens;      // optional: the token embedding otherwise
  kernels::WeightView shared_head_head;  // optional: output.weight otherwise
  std::vector<float> shared_head_norm;   // optional: output_norm otherwise

  // blk.IL.nextn.{eh_proj, enorm, hnorm} (required) and
  // {embed_tokens, shared_head_head, shared_head_norm} (optional); with
  // `nemotron`, shared_head_norm required and neither of the other two
  // (Nemotron 3's loader).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il, bool nemotron = false);
};

// Calls visit_layer(v', all, il) for each multi-token-prediction layer il
// of the file, v' leaving their scales without effect (llama.cpp's generic
// pass reads none for them) and `all` the hparams that hold them
// (ModelHParams::with_mtp_layers). Nothing when the model has none, or when
// the file leaves them out (llama.cpp's trunk_only: the first has no
// nextn.eh_proj) and the family's loader does not require them.
void visit_mtp_layers(
    TensorVisitor& v, const ModelHParams& hp, bool required,
    const std::function<void(TensorVisitor&, const ModelHParams& all, int64_t il)>& visit_layer);

}  // namespace cortiq
