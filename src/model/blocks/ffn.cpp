#include "model/blocks/ffn.hpp"

#include "model/tensor_table.hpp"

namespace cortiq {

namespace {

void apply_scale(ForwardContext& ctx, Tensor rows, float scale) {
  if (scale != 1.0f) ctx.backend.scale(rows, scale);
}

// down(act(up(x))) with biases and scales in llama.cpp's build_ffn order;
// act is gelu, relu_sqr or xielu.
void ungated_ffn(const FfnWeights& w, FfnActivation activation, const ModelHParams& hp,
                 int64_t n_ff, int64_t n_rows, ForwardContext& ctx, ConstTensor in, Tensor out) {
  auto& buf = ctx.buffers;
  const auto rows = static_cast<size_t>(n_rows);
  auto up = ctx.backend.scratch(buf.up, rows * static_cast<size_t>(n_ff));
  ctx.backend.matmul(w.up, in, n_rows, up, n_ff);
  ctx.backend.add_bias_rows(up, w.up_b);
  apply_scale(ctx, up, w.up_scale);
  if (activation == FfnActivation::xielu) {
    ctx.backend.xielu(up, w.xielu);
  } else {
    ctx.backend.unary(activation == FfnActivation::relu_sqr ? UnaryOp::relu_sqr : UnaryOp::gelu,
                      up);
  }
  // build_ffn's ggml_div of the activation by ffn_act (MPT), row by row.
  if (!w.act_scales.empty()) ctx.backend.divide_rows(up, w.act_scales);
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  ctx.backend.matmul(w.down, up, n_rows, out_rows, hp.n_embd);
  ctx.backend.add_bias_rows(out_rows, w.down_b);
  apply_scale(ctx, out_rows, w.down_scale);
}

// down(silu(g) * u) where each row of up(x) is [g | u] (Phi-3's fused
// gate and up: ggml_swiglu of one tensor, bias and scale on the whole row).
void fused_gate_up_ffn(const FfnWeights& w, const ModelHParams& hp, int64_t n_ff, int64_t n_rows,
                       ForwardContext& ctx, ConstTensor in, Tensor out) {
  auto& buf = ctx.buffers;
  const auto rows = static_cast<size_t>(n_rows);
  const auto width = static_cast<size_t>(n_ff);
  auto both = ctx.backend.scratch(buf.up, rows * 2 * width);
  ctx.backend.matmul(w.up, in, n_rows, both, 2 * n_ff);
  ctx.backend.add_bias_rows(both, w.up_b);
  apply_scale(ctx, both, w.up_scale);
  auto gated = ctx.backend.scratch(buf.gate, rows * width);
  ctx.backend.glu_halves(GluOp::swiglu, both, gated, width);
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  ctx.backend.matmul(w.down, gated, n_rows, out_rows, hp.n_embd);
  ctx.backend.add_bias_rows(out_rows, w.down_b);
  apply_scale(ctx, out_rows, w.down_scale);
}

}  // namespace

void FfnWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, FfnTensors extra) {
  n_ff = extra.width != 0 ? extra.width : hp.layer(layer).n_ff;
  // "ffn_up.weight" -> "ffn_up" + suffix + ".weight".
  const auto name = [&](std::string_view what) {
    const size_t dot = what.find('.');
    return layer_tensor_name(layer, std::string(what.substr(0, dot)) + std::string(extra.suffix) +
                                        std::string(what.substr(dot)));
  };
  fused_gate_up = extra.fused_gate_up;
  if (fused_gate_up) extra.gated = false;  // the gate is the first half of ffn_up
  const int64_t up_rows = fused_gate_up ? 2 * n_ff : n_ff;
  if (extra.gated) v.matrix(gate, name("ffn_gate.weight"), hp.n_embd, n_ff);
  v.matrix(up, name("ffn_up.weight"), hp.n_embd, up_rows);
  v.matrix(down, name("ffn_down.weight"), n_ff, hp.n_embd);
  if (extra.sub_norm) v.vector(sub_norm, name("ffn_sub_norm.weight"), n_ff, TensorKind::norm);
  if (extra.biases || extra.biases_required) {
    const bool required = extra.biases_required;
    if (extra.gated) v.vector(gate_b, name("ffn_gate.bias"), n_ff, TensorKind::bias, required);
    v.vector(up_b, name("ffn_up.bias"), up_rows, TensorKind::bias, required);
    v.vector(down_b, name("ffn_down.bias"), hp.n_embd, TensorKind::bias, required);
  }
  for (const char* matrix : {"ffn_gate", "ffn_up", "ffn_down"}) {
    if (!extra.gated && std::string_view(matrix) == "ffn_gate") continue;
    const std::string scale = name(std::string(matrix) + ".scale");
    if (!extra.scales_applied) v.scale_without_effect(scale);
    v.scale_without_effect(name(std::string(matrix) + ".input_scale"));
  }
  if (extra.act_scales) {
    v.vector(act_scales, name("ffn.act.scales"), n_ff, TensorKind::norm, /*required=*/false);
  }
  if (extra.scales_applied) {
    if (extra.gated) v.scale(gate_scale, name("ffn_gate.scale"));
    v.scale(up_scale, name("ffn_up.scale"));
    v.scale(down_scale, name("ffn_down.scale"));
  }
}

void ffn(const FfnWeights& w, FfnActivation activation, const ModelHParams& hp, int64_t layer,
         int64_t n_rows, ForwardContext& ctx, ConstTensor in, Tensor out) {
  auto& buf = ctx.buffers;
  const int64_t n_ff = w.n_ff != 0 ? w.n_ff : hp.layer(layer).n_ff;
  const auto rows = static_cast<size_t>(n_rows);
  if (activation == FfnActivation::gelu || activation == FfnActivation::relu_sqr ||
      activation == FfnActivation::xielu) {
    ungated_ffn(w, activation, hp, n_ff, n_rows, ctx, in, out);
    return;
  }
  if (w.fused_gate_up) {
    fused_gate_up_ffn(w, hp, n_ff, n_rows, ctx, in, out);
    return;
  }
  auto gate = ctx.backend.scratch(buf.gate, rows * static_cast<size_t>(n_ff));
  auto up = ctx.backend.scratch(buf.up, rows * static_cast<size_t>(n_ff));

  const MatmulProduct gate_up[] = {{&w.gate, gate, n_ff}, {&w.up, up, n_ff}};
  ctx.backend.matmul_shared_input(gate_up, in, n_rows);
  // llama.cpp's build_ffn: bias, then scale, for each projection.
  ctx.backend.add_bias_rows(up, w.up_b);
  apply_scale(ctx, up, w.up_scale);
  ctx.backend.add_bias_rows(gate, w.gate_b);
  apply_scale(ctx, gate, w.gate_scale);
  // gated activations only here (ungated_ffn has the others)
  ctx.backend.glu(activation == FfnActivation::geglu ? GluOp::geglu : GluOp::swiglu, gate, up,
                  gate);
  if (!w.sub_norm.empty()) {
    ctx.backend.rms_norm_rows(gate, w.sub_norm, hp.rms_eps, gate, static_cast<size_t>(n_ff));
  }
  const auto out_rows = out.first(rows * static_cast<size_t>(hp.n_embd));
  ctx.backend.matmul(w.down, gate, n_rows, out_rows, hp.n_embd);
  ctx.backend.add_bias_rows(out_rows, w.down_b);
  apply_scale(ctx, out_rows, w.down_scale);
}

}  // namespace cortiq
