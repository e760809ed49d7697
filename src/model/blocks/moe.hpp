// The mixture-of-experts feed-forward branch (llama.cpp's build_moe_ffn):
// a router scores the experts for each row, the row runs through the k best
// of them, and their outputs are added, each times its routing weight:
//
//   probs    = gating(router . x + router_bias)   softmax, sigmoid, or none
//   chosen   = the k largest probs (+ selection bias; within the best
//              groups when grouped; ties: the lower expert index first)
//   w        = probs[chosen] (softmax_weight: their softmax);
//              normalized: w / max(sum w, 6.1e-5); * scale
//   out      = sum over slots j = 0..k-1, in order, of
//              w_j * down_e(act(gate_e(x), up_e(x))),  e = chosen[j]
//              act: silu(g) * u, or GPT-OSS's clamped form; each product
//              times its expert's scale, plus its expert's bias
//   shared   (DeepSeek) out += shared_ffn(x)
//            (Qwen2-MoE) out += sigmoid(shared_router . x) * shared_ffn(x)
//
// The batch's rows are grouped by expert (each expert's rows gathered, one
// matmul per expert, the weighted results scattered back), so a decode step
// reads only the chosen experts' weights; every output is still one
// fixed-order dot per row, so the result does not depend on the batch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/cpu/weight_view.hpp"
#include "model/blocks/ffn.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;

// llama.cpp clamps the sum of the chosen weights at the smallest normal
// fp16 before dividing by it.
inline constexpr float kRouterMinWeightSum = 6.103515625e-5f;

// One row's routing: from its router scores (n_expert values, replaced by
// the gating's probabilities), the experts.size() chosen experts, best
// first, and their weights. `selection_bias` (n_expert values, or empty)
// is added to the probabilities to choose the experts, not to weigh them
// (DeepSeek V3's e_score_correction_bias). A -inf score gets weight 0; a
// row of -inf scores only is defined: the first experts, weight 0 each.
void route(std::span<float> scores, const RouterSpec& spec, std::span<int32_t> experts,
           std::span<float> weights, std::span<const float> selection_bias = {});

enum class ExpertActivation : uint8_t {
  swiglu,      // silu(gate) * up; silu(up) without a gate
  swiglu_oai,  // GPT-OSS: kernels::swiglu_oai with alpha 1.702, limit 7
  reglu,       // relu(gate) * up; relu(up) without a gate (SmallThinker)
  geglu,       // gelu_tanh(gate) * up; gelu_tanh(up) without a gate (Grok)
  relu_sqr,    // relu(up)^2, gateless only (Nemotron-H; its shared expert too)
};

// What the router scores: the FFN's normed input, or the layer's input
// before its attention (SmallThinker's router runs ahead of the layer).
enum class RouterInput : uint8_t { ffn_input, layer_input };

enum class SharedExpert : uint8_t {
  none,
  always,  // added at weight 1 (DeepSeek: n_expert_shared experts as one FFN)
  gated,   // times sigmoid(ffn_gate_inp_shexp . x) (Qwen2-MoE)
};

// What a family's MoE layer carries, as llama.cpp reads it for that family.
struct MoeTensors {
  bool gate_optional = false;   // ffn_gate_exps may be absent: silu(up) (llama)
  bool scales_applied = false;  // ffn_*_exps.scale ([n_expert]) multiply each expert's product
  SharedExpert shared_expert = SharedExpert::none;  // *_shexp, hp.n_ff_shared_expert wide
  bool shared_scales_applied = false;    // the shared expert's *_shexp.scale multiply (HY V3)
  bool selection_bias = false;           // exp_probs_b.bias [n_expert], optional
  bool selection_bias_required = false;  // ... and always there (GLM-4.5, MiniMax-M2)
  // Its name after blk.N. (HY V3's loader asks for blk.N.exp_probs_b).
  std::string_view selection_bias_name = "exp_probs_b.bias";
  bool fused_gate_up = false;  // ffn_gate_up_exps may replace ffn_gate_exps and ffn_up_exps
  bool router_bias = false;    // ffn_gate_inp.bias [n_expert], required (GPT-OSS)
  // ffn_{gate,up}_exps.bias [n_ff, n_expert], ffn_down_exps.bias [n_embd,
  // n_expert], required (GPT-OSS)
  bool expert_biases = false;
  ExpertActivation activation = ExpertActivation::swiglu;
  RouterInput router_input = RouterInput::ffn_input;
  // Each chosen expert reads its input times its weight and adds its output
  // unweighted (Llama 4; llama.cpp's weight_before_ffn).
  bool weights_before_experts = false;
  // ffn_latent_down [n_embd -> hp.moe_latent_size] before the experts and
  // ffn_latent_up back after their sum (Nemotron 3 Super): the experts work
  // in the latent width. Optional, as llama.cpp reads them, when that width
  // is n_embd.
  bool latent = false;
  // With `latent`: false where the experts are latent-wide but the layer
  // has no projections of its own (Nemotron 3's MTP block: bound, not run).
  bool latent_projections = true;
};

struct MoeWeights {
  kernels::WeightView router;                           // ffn_gate_inp [n_embd, n_expert]
  std::vector<float> selection_bias;                    // exp_probs_b.bias [n_expert], or empty
  std::vector<kernels::WeightView> gate, up, down;      // one view per expert; gate may be empty
  std::vector<float> gate_scale, up_scale, down_scale;  // [n_expert], or empty
  std::vector<float> router_bias;                       // [n_expert], or empty
  std::vector<float> gate_b, up_b, down_b;              // [n_expert][n_ff or n_embd], or empty
  ExpertActivation activation = ExpertActivation::swiglu;
  RouterInput router_input = RouterInput::ffn_input;
  bool weights_before_experts = false;
  kernels::WeightView latent_down, latent_up;  // MoeTensors::latent, or empty
  int64_t width = 0;  // the experts' input and output width: n_embd, or the latent one
  SharedExpert shared_expert = SharedExpert::none;
  std::vector<float> shared_router;  // ffn_gate_inp_shexp [n_embd] (gated)
  FfnWeights shared;                 // ffn_{gate,up,down}_shexp

  // blk.N.ffn_gate_inp.weight, blk.N.ffn_{gate,up,down}_exps.weight and
  // their scales, and the shared expert's tensors when the family has one.
  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, MoeTensors extra);
};

// Reads ARCH.expert_count and expert_used_count (both required and
// positive, at most 1024 experts, used <= count, as llama.cpp checks) and
// the expert width: ARCH.expert_feed_forward_length, or n_ff / n_used when
// absent or 0 (Qwen-MoE), or n_ff itself when `width_key` is false (OLMoE,
// Mixtral); with `shared_expert`, ARCH.expert_shared_feed_forward_length
// (default n_ff); and the router's groups (ARCH.expert_group_count,
// expert_group_used_count), which llama.cpp honours in every family.
void read_expert_hparams(const HParamReader& keys, ModelHParams& hp, bool width_key,
                         bool shared_expert);

// The layers before the first with a router (blk.N.ffn_gate_inp.weight)
// among the first `n_checked`, for the families whose llama.cpp loader
// takes every FFN tensor as optional and runs experts where the router is
// (HY V3, MiMo V2): those leading layers are dense, and a routerless layer
// after them is refused. gen-model's parse of its own keys (a file without
// tensors) gets 1: its first layer dense.
int64_t dense_lead_from_routers(const HParamReader& keys, int64_t n_checked);

// ARCH.expert_gating_func as llama.cpp numbers it (1 softmax, 2 sigmoid);
// absent or 0 is `when_absent` (the family's default: deepseek2 softmax,
// glm4moe sigmoid) or, without one, refused (llama.cpp's graph aborts).
RouterGating read_expert_gating(const HParamReader& keys, std::optional<RouterGating> when_absent);

// out[r] = moe(in[r]) for n_rows rows of n_embd values at layer `layer`,
// routed as hp.router says; the router scores `router_in` (the layer's
// input rows, RouterInput::layer_input) or, when empty, `in`.
void moe_ffn(const MoeWeights& w, const ModelHParams& hp, int64_t layer, int64_t n_rows,
             ForwardContext& ctx, ConstTensor in, Tensor out, ConstTensor router_in = {});

}  // namespace cortiq
