// The feed-forward branch: up(x) (and gate(x) for the gated kinds), the
// activation, down(...), with optional biases and per-tensor scales. It
// computes the branch only: the family places the norms and the residual add.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;

enum class FfnActivation : uint8_t {
  swiglu,  // down(silu(gate(x)) * up(x))
  geglu,   // down(gelu_tanh(gate(x)) * up(x)) (Gemma)
  gelu,    // down(gelu_tanh(up(x))), no gate (StarCoder2, GPT-2)
  // down(relu(up(x))^2), no gate (Nemotron, Arcee: llama.cpp's LLM_FFN_RELU_SQR)
  relu_sqr,
  // down(xielu(up(x))), no gate, with the layer's FfnWeights::xielu (Apertus)
  xielu,
};

// What a family's FFN may carry beyond its three matrices, as llama.cpp
// reads (and applies) it for that family.
struct FfnTensors {
  bool gated = true;             // ffn_gate.weight; false: up, activation, down
  bool biases = false;           // ffn_{gate,up,down}.bias
  bool biases_required = false;  // the biases must be there (StarCoder2)
  bool scales_applied = true;    // false: NAME.scale read but without effect (Qwen2, Gemma)
  // No ffn_gate: ffn_up is [n_embd, 2 * n_ff], each row's first half the
  // gate and its second half the up projection (Phi-3, GLM-4: llama.cpp's
  // ggml_swiglu of one tensor). With FfnActivation::swiglu only.
  bool fused_gate_up = false;
  // blk.N.ffn.act.scales, optional: the ungated GELU's output is divided by
  // them (MPT's AWQ ScaleActivation).
  bool act_scales = false;
  // ffn_sub_norm.weight [n_ff] (required): an RMS norm of the activation's
  // output before ffn_down (BitNet). Gated kinds only.
  bool sub_norm = false;
  // After the matrix names: "_shexp" reads ffn_gate_shexp.weight... (a
  // mixture-of-experts layer's shared expert).
  std::string_view suffix = {};
  // The FFN's width; 0: the layer's n_ff.
  int64_t width = 0;
};

struct FfnWeights {
  kernels::WeightView gate, up, down;
  std::vector<float> gate_b, up_b, down_b;             // optional biases
  float gate_scale = 1, up_scale = 1, down_scale = 1;  // NAME.scale, 1 when absent
  bool fused_gate_up = false;     // `up` holds gate and up (FfnTensors::fused_gate_up)
  std::vector<float> act_scales;  // [n_ff] divisors, or empty
  kernels::XieluParams xielu;     // FfnActivation::xielu's parameters (set by the family)
  std::vector<float> sub_norm;    // ffn_sub_norm (FfnTensors::sub_norm), or empty
  int64_t n_ff = 0;               // the width visit() read (FfnTensors::width or the layer's)

  // blk.N.ffn_{gate,up,down}.weight, their optional scales, and their
  // optional biases when the family has them (llama.cpp reads them for some).
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, FfnTensors extra);
};

// out[r] = ffn(in[r]) for n_rows rows of n_embd values at layer `layer`.
void ffn(const FfnWeights& w, FfnActivation activation, const ModelHParams& hp, int64_t layer,
         int64_t n_rows, ForwardContext& ctx, ConstTensor in, Tensor out);

}  // namespace cortiq
