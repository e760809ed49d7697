#include "model/blocks/moe.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

namespace {

// The block's working memory in a pass's buffers (ForwardBuffers::of).
struct MoeScratch {
  // Router scores [rows][n_expert] (where the backend computes them) and
  // their host copy that routing reads; routing weights (host, and where
  // the backend scales by them) and chosen experts [rows][k].
  std::vector<float> scores, probs, weights, slot_weights;
  std::vector<int32_t> chosen;
  // The weighted outputs of every slot [rows][k][width]; one expert's
  // gathered rows and outputs; the slots that chose the expert at hand and
  // the input rows they read.
  std::vector<float> slots, in, out;
  std::vector<int32_t> members, rows;
  std::vector<float> shared_gate;            // [rows]: the shared expert's gates
  std::vector<float> latent_in, latent_out;  // [rows][latent width] (MoeTensors::latent)
  std::vector<float> weighted_in;            // [rows * k][n_embd]: Llama 4's weighted inputs
};

// llama.cpp's LLAMA_MAX_EXPERTS.
constexpr int64_t kMaxExperts = 1024;

// ggml_soft_max of one row: the exponentials of x - max, their sum in
// double, then each times the float reciprocal of the sum. A row of -inf
// only (where ggml gives NaN) gives zeros.
void softmax_inplace(std::span<float> x) {
  float max = -std::numeric_limits<float>::infinity();
  for (const float v : x) max = std::max(max, v);
  if (max == -std::numeric_limits<float>::infinity()) {
    std::ranges::fill(x, 0.0f);
    return;
  }
  double sum = 0.0;
  for (float& v : x) {
    v = std::exp(v - max);
    sum += v;
  }
  const auto inverse = static_cast<float>(1.0 / sum);
  for (float& v : x) v *= inverse;
}

void sigmoid_inplace(std::span<float> x) {
  for (float& v : x) v = 1.0f / (1.0f + std::exp(-v));
}

// The index of the largest value not taken; a tie goes to the lower
// index (what ggml's descending argsort gives for up to 16 values).
size_t best_untaken(std::span<const float> values, std::span<const bool> taken) {
  size_t best = values.size();
  for (size_t i = 0; i < values.size(); ++i) {
    if (taken[i]) continue;
    if (best == values.size() || values[i] > values[best]) best = i;
  }
  return best;
}

// Grouped top-k (DeepSeek V3's n_group / topk_group, as llama.cpp's
// build_moe_ffn): each group scored by the sum of its two best values, and
// the values of every group but the n_groups_used best set to -inf.
void keep_best_groups(std::span<float> selection, const RouterSpec& spec) {
  const auto n_groups = static_cast<size_t>(spec.n_groups);
  const size_t per_group = selection.size() / n_groups;
  std::array<float, kMaxExperts> group_score;
  for (size_t g = 0; g < n_groups; ++g) {
    const auto group = selection.subspan(g * per_group, per_group);
    std::array<bool, kMaxExperts> taken{};
    const size_t first = best_untaken(group, taken);
    taken[first] = true;
    group_score[g] = group[first];
    if (per_group > 1) group_score[g] += group[best_untaken(group, taken)];
  }
  std::array<bool, kMaxExperts> kept{};
  for (int64_t j = 0; j < spec.n_groups_used; ++j) {
    kept[best_untaken(std::span(group_score).first(n_groups), kept)] = true;
  }
  for (size_t g = 0; g < n_groups; ++g) {
    if (kept[g]) continue;
    std::ranges::fill(selection.subspan(g * per_group, per_group),
                      -std::numeric_limits<float>::infinity());
  }
}

// The rows of `experts` (slots r * k + j) that chose expert e.
void members_of(std::span<const int32_t> chosen, int32_t e, std::vector<int32_t>& members) {
  members.clear();
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i] == e) members.push_back(static_cast<int32_t>(i));
  }
}

// Expert e's row of a [n_expert][n] bias table, or nothing.
std::span<const float> expert_bias(const std::vector<float>& table, size_t e, size_t n) {
  if (table.empty()) return {};
  return std::span(table).subspan(e * n, n);
}

// The gated activations as backend ops; relu_sqr experts have no gate.
GluOp glu_of(ExpertActivation activation) {
  switch (activation) {
    case ExpertActivation::swiglu_oai:
      return GluOp::swiglu_oai;
    case ExpertActivation::reglu:
      return GluOp::reglu;
    case ExpertActivation::geglu:
      return GluOp::geglu;
    case ExpertActivation::swiglu:
    case ExpertActivation::relu_sqr:
      break;
  }
  return GluOp::swiglu;
}

// A gateless expert's activation of its up product.
UnaryOp gateless_op(ExpertActivation activation) {
  switch (activation) {
    case ExpertActivation::reglu:
      return UnaryOp::relu;
    case ExpertActivation::relu_sqr:
      return UnaryOp::relu_sqr;
    case ExpertActivation::geglu:
      return UnaryOp::gelu;
    case ExpertActivation::swiglu:
    case ExpertActivation::swiglu_oai:
      break;
  }
  return UnaryOp::silu;
}

// An expert's activation in place: act(gate, up) into gate, or act(up)
// for a gateless expert; returns the tensor holding it.
ConstTensor expert_activation(const MoeWeights& w, size_t e, Tensor gate, Tensor up, size_t n_ff,
                              Backend& backend) {
  // llama.cpp's build_lora_mm_id: each expert's scale times its product,
  // then its bias (ggml_add_id).
  if (!w.up_scale.empty()) backend.scale(up, w.up_scale[e]);
  backend.add_bias_rows(up, expert_bias(w.up_b, e, n_ff));
  if (w.gate.empty()) {
    backend.unary(gateless_op(w.activation), up);
    return up;
  }
  if (!w.gate_scale.empty()) backend.scale(gate, w.gate_scale[e]);
  backend.add_bias_rows(gate, expert_bias(w.gate_b, e, n_ff));
  backend.glu(glu_of(w.activation), gate, up, gate);
  return gate;
}

// Expert e's down product times its scale (ffn_down_exps.scale), when the
// family applies one, plus its bias.
void scale_down(const MoeWeights& w, size_t e, Tensor y, size_t n_embd, Backend& backend) {
  if (!w.down_scale.empty()) backend.scale(y, w.down_scale[e]);
  backend.add_bias_rows(y, expert_bias(w.down_b, e, n_embd));
}

// A decode row: every chosen expert reads the same input, so all their gate
// and up products come from one matmul call (the input quantized once, one
// fork/join; each product the bits of its own call). slots[j] gets expert
// chosen[j]'s output, not yet weighed.
void one_row_experts(const MoeWeights& w, const ModelHParams& hp, ForwardContext& ctx,
                     std::span<const int32_t> chosen, ConstTensor in, Tensor slots) {
  auto& buf = ctx.buffers;
  const size_t k = chosen.size();
  const auto n_ff = static_cast<size_t>(hp.n_ff_expert);
  const auto n_embd = static_cast<size_t>(w.width);
  const Tensor gate = ctx.backend.scratch(buf.gate, k * n_ff);
  const Tensor up = ctx.backend.scratch(buf.up, k * n_ff);
  std::vector<MatmulProduct>& products = buf.products;
  products.clear();
  for (size_t j = 0; j < k; ++j) {
    const auto e = static_cast<size_t>(chosen[j]);
    if (!w.gate.empty())
      products.push_back({&w.gate[e], gate.subspan(j * n_ff, n_ff), hp.n_ff_expert});
    products.push_back({&w.up[e], up.subspan(j * n_ff, n_ff), hp.n_ff_expert});
  }
  ctx.backend.matmul_shared_input(products, in, 1);
  // Then every down projection, each of its own activation, in one call.
  std::vector<ConstTensor>& acts = buf.product_inputs;
  acts.clear();
  products.clear();
  for (size_t j = 0; j < k; ++j) {
    const auto e = static_cast<size_t>(chosen[j]);
    acts.push_back(expert_activation(w, e, gate.subspan(j * n_ff, n_ff), up.subspan(j * n_ff, n_ff),
                                     n_ff, ctx.backend));
    products.push_back({&w.down[e], slots.subspan(j * n_embd, n_embd), w.width});
  }
  ctx.backend.matmul_each_input(products, acts);
  for (size_t j = 0; j < k; ++j) {
    scale_down(w, static_cast<size_t>(chosen[j]), slots.subspan(j * n_embd, n_embd), n_embd,
               ctx.backend);
  }
}

// Several rows: each expert over the rows that chose it (gathered, one
// matmul per expert), slot r * k + j of `slots` getting row r's output of
// its j-th expert, not yet weighed. With `input_per_slot`, `in` holds one
// input row per slot (Llama 4's weighted inputs) instead of one per row.
void grouped_experts(const MoeWeights& w, const ModelHParams& hp, ForwardContext& ctx,
                     std::span<const int32_t> chosen, ConstTensor in, Tensor slots,
                     bool input_per_slot) {
  auto& buf = ctx.buffers;
  auto& own = buf.of<MoeScratch>();
  const auto k = static_cast<size_t>(hp.n_expert_used);
  const auto n_embd = static_cast<size_t>(w.width);
  const auto n_ff = static_cast<size_t>(hp.n_ff_expert);
  auto& members = own.members;
  auto& input_rows = own.rows;
  for (size_t e = 0; e < static_cast<size_t>(hp.n_expert); ++e) {
    members_of(chosen, static_cast<int32_t>(e), members);
    if (members.empty()) continue;
    const size_t m = members.size();
    input_rows.resize(m);
    for (size_t i = 0; i < m; ++i) {
      input_rows[i] = input_per_slot ? members[i] : members[i] / static_cast<int32_t>(k);
    }
    const Tensor x = ctx.backend.scratch(own.in, m * n_embd);
    ctx.backend.gather_rows(in, input_rows, x, n_embd);
    const Tensor gate = ctx.backend.scratch(buf.gate, m * n_ff);
    const Tensor up = ctx.backend.scratch(buf.up, m * n_ff);
    const auto n = static_cast<int64_t>(m);
    if (!w.gate.empty()) {
      const MatmulProduct gate_up[] = {{&w.gate[e], gate, hp.n_ff_expert},
                                       {&w.up[e], up, hp.n_ff_expert}};
      ctx.backend.matmul_shared_input(gate_up, x, n);
    } else {
      ctx.backend.matmul(w.up[e], x, n, up, hp.n_ff_expert);
    }
    const ConstTensor act = expert_activation(w, e, gate, up, n_ff, ctx.backend);
    const Tensor y = ctx.backend.scratch(own.out, m * n_embd);
    ctx.backend.matmul(w.down[e], act, n, y, w.width);
    scale_down(w, e, y, n_embd, ctx.backend);
    ctx.backend.scatter_rows(y, slots, members, n_embd);
  }
}

// Qwen2-MoE's shared expert gate, sigmoid(shared_router . x) per row, as
// llama.cpp's graph computes it: the product, then silu(g) / g.
Tensor shared_expert_gates(const MoeWeights& w, const ModelHParams& hp, int64_t n_rows,
                           ForwardContext& ctx, ConstTensor in) {
  // The router's one row as a matrix (its floats stay where the weights
  // keep them, so a device uploads it once).
  const kernels::WeightView router{
      .type = GgmlType::F32,
      .n_rows = 1,
      .n_cols = hp.n_embd,
      .row_bytes = static_cast<size_t>(hp.n_embd) * sizeof(float),
      .data = reinterpret_cast<const std::byte*>(w.shared_router.data()),
      .name = "ffn_gate_inp_shexp.weight"};
  const Tensor gates =
      ctx.backend.scratch(ctx.buffers.of<MoeScratch>().shared_gate, static_cast<size_t>(n_rows));
  ctx.backend.matmul(router, in, n_rows, gates, 1);
  ctx.backend.unary(UnaryOp::silu_ratio, gates);
  return gates;
}

}  // namespace

void route(std::span<float> scores, const RouterSpec& spec, std::span<int32_t> experts,
           std::span<float> weights, std::span<const float> selection_bias) {
  const std::span<float> probs = scores;
  // What the experts are chosen by: the probabilities (or, taken before
  // the gating, the raw scores), plus the bias.
  std::array<float, kMaxExperts> selection_values;
  const std::span<float> selection = std::span(selection_values).first(probs.size());
  if (spec.select_by_scores) std::ranges::copy(scores, selection.begin());
  if (spec.gating == RouterGating::softmax) {
    softmax_inplace(probs);
  } else if (spec.gating == RouterGating::sigmoid) {
    sigmoid_inplace(probs);
  }
  if (!spec.select_by_scores) std::ranges::copy(probs, selection.begin());
  if (!selection_bias.empty()) kernels::add_inplace(selection, selection_bias);
  if (spec.n_groups > 1) keep_best_groups(selection, spec);
  std::array<bool, kMaxExperts> taken{};
  for (size_t j = 0; j < experts.size(); ++j) {
    const size_t best = best_untaken(selection, taken);
    taken[best] = true;
    experts[j] = static_cast<int32_t>(best);
    weights[j] = probs[best];
  }
  if (spec.gating == RouterGating::softmax_weight) softmax_inplace(weights);
  if (spec.normalize) {
    double sum = 0.0;  // ggml_sum_rows adds in double
    for (const float w : weights) sum += w;
    const float divisor = std::max(static_cast<float>(sum), kRouterMinWeightSum);
    for (float& w : weights) w /= divisor;
  }
  if (spec.scale != 0.0f && spec.scale != 1.0f) {
    for (float& w : weights) w *= spec.scale;
  }
}

namespace {

// A key llama.cpp reads as one value or one per layer (get_key_or_arr).
// Cortiq routes every layer alike, so the layers' values other than 0 (the
// layers without experts) must agree; Nemotron 3 Puzzle's, which differ,
// are refused.
int64_t one_value_for_all_layers(const HParamReader& keys, std::string_view name, int64_t n_layer) {
  const std::vector<int64_t> values = keys.per_layer_uint(name, n_layer, 0);
  int64_t value = 0;
  for (const int64_t v : values) {
    if (v == 0 || v == value) continue;
    if (value != 0) {
      keys.invalid(keys.key(name) + " differs between layers, which is not supported");
    }
    value = v;
  }
  return value;
}

}  // namespace

void read_expert_hparams(const HParamReader& keys, ModelHParams& hp, bool width_key,
                         bool shared_expert) {
  const auto n_layer = std::ssize(hp.layers);  // the MTP layers' too
  hp.n_expert = keys.uint_or("expert_count", 0);
  hp.n_expert_used = one_value_for_all_layers(keys, "expert_used_count", n_layer);
  if (hp.n_expert <= 0 || hp.n_expert_used <= 0) {
    keys.invalid("expert_count and expert_used_count must be positive for " + hp.arch);
  }
  if (hp.n_expert > kMaxExperts || hp.n_expert_used > hp.n_expert) {
    keys.invalid(strfmt("expert_used_count %lld of expert_count %lld (at most %lld experts)",
                        static_cast<long long>(hp.n_expert_used),
                        static_cast<long long>(hp.n_expert), static_cast<long long>(kMaxExperts)));
  }
  hp.n_ff_expert =
      width_key ? one_value_for_all_layers(keys, "expert_feed_forward_length", n_layer) : 0;
  if (hp.n_ff_expert == 0) hp.n_ff_expert = width_key ? hp.n_ff / hp.n_expert_used : hp.n_ff;
  if (hp.n_ff_expert <= 0) keys.invalid("the experts' feed-forward width is 0");
  if (shared_expert) {
    hp.n_ff_shared_expert = keys.uint_or("expert_shared_feed_forward_length", 0);
    if (hp.n_ff_shared_expert == 0) hp.n_ff_shared_expert = hp.n_ff;
  }
  // Grouped top-k, which llama.cpp reads and checks for every family with
  // experts: fewer groups than experts, and with more than one group, equal
  // groups of which some but not all are used.
  RouterSpec& r = hp.router;
  r.n_groups = keys.uint_or("expert_group_count", 0);
  r.n_groups_used = keys.uint_or("expert_group_used_count", 0);
  if (r.n_groups >= hp.n_expert) keys.invalid("expert_group_count must be below expert_count");
  if (r.n_groups > 1 &&
      (hp.n_expert % r.n_groups != 0 || r.n_groups_used <= 0 || r.n_groups_used >= r.n_groups)) {
    keys.invalid(
        "expert_group_count must divide expert_count, and 0 < expert_group_used_count "
        "< expert_group_count");
  }
}

int64_t dense_lead_from_routers(const HParamReader& keys, int64_t n_checked) {
  const auto& file = keys.file();
  if (file.tensors().empty()) return 1;
  const auto has = [&](int64_t il, std::string_view what) {
    return file.find_tensor(layer_tensor_name(il, what)) != nullptr;
  };
  int64_t lead = 0;
  while (lead < n_checked && !has(lead, "ffn_gate_inp.weight")) ++lead;
  for (int64_t il = lead; il < n_checked; ++il) {
    if (!has(il, "ffn_gate_inp.weight") && has(il, "attn_norm.weight")) {
      keys.invalid(strfmt("layer %lld has no experts after layer %lld had them",
                          static_cast<long long>(il), static_cast<long long>(lead)));
    }
  }
  return lead;
}

RouterGating read_expert_gating(const HParamReader& keys, std::optional<RouterGating> when_absent) {
  const int64_t gating = keys.uint_or("expert_gating_func", 0);
  if (gating == 0 && when_absent) return *when_absent;
  if (gating == 1) return RouterGating::softmax;
  if (gating == 2) return RouterGating::sigmoid;
  if (gating == 0) {
    keys.invalid(keys.key("expert_gating_func") +
                 " is absent or 0, and llama.cpp has no default for this architecture (1 "
                 "softmax, 2 sigmoid)");
  }
  keys.invalid("expert_gating_func " + std::to_string(gating) +
               " is not supported (1 softmax, 2 sigmoid)");
}

void MoeWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, MoeTensors extra) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const int64_t n_expert = hp.n_expert, n_ff = hp.n_ff_expert;
  v.router(router, name("ffn_gate_inp.weight"), hp.n_embd, n_expert);
  if (extra.router_bias)
    v.vector(router_bias, name("ffn_gate_inp.bias"), n_expert, TensorKind::bias);
  width = extra.latent && hp.moe_latent_size > 0 ? hp.moe_latent_size : hp.n_embd;
  // Both latent projections, or neither (only where the latent width is
  // n_embd, which gen-model writes without them).
  if (extra.latent && extra.latent_projections &&
      (width != hp.n_embd || v.has(name("ffn_latent_down.weight"), false))) {
    v.matrix(latent_down, name("ffn_latent_down.weight"), hp.n_embd, width);
    v.matrix(latent_up, name("ffn_latent_up.weight"), width, hp.n_embd);
  }
  activation = extra.activation;
  router_input = extra.router_input;
  weights_before_experts = extra.weights_before_experts;
  // llama.cpp's create_tensor_gate_up_exps: gate and up may come as one
  // stack of 2 * n_ff rows per expert (gen-model writes them apart); no
  // scales for them then.
  const std::string gate_up = name("ffn_gate_up_exps.weight");
  const bool fused = extra.fused_gate_up && v.has(gate_up, /*written=*/false);
  if (fused) {
    std::vector<kernels::WeightView> halves;
    v.experts(halves, gate_up, width, 2 * n_ff, n_expert, true, /*n_parts=*/2);
    gate.clear();
    up.clear();
    for (size_t e = 0; e < halves.size(); e += 2) {
      gate.push_back(halves[e]);
      up.push_back(halves[e + 1]);
    }
  } else {
    // Squared-ReLU experts have no gate: a file with one is refused as
    // carrying a tensor the family does not use.
    if (extra.activation != ExpertActivation::relu_sqr) {
      v.experts(gate, name("ffn_gate_exps.weight"), width, n_ff, n_expert, !extra.gate_optional);
    }
    v.experts(up, name("ffn_up_exps.weight"), width, n_ff, n_expert);
  }
  v.experts(down, name("ffn_down_exps.weight"), n_ff, width, n_expert);
  const bool gateless = extra.activation == ExpertActivation::relu_sqr;
  for (const char* matrix : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    if (fused && matrix != std::string_view("ffn_down_exps")) continue;
    if (gateless && matrix == std::string_view("ffn_gate_exps")) continue;
    const std::string scale = name(std::string(matrix) + ".scale");
    if (!extra.scales_applied) v.without_effect(scale, n_expert, TensorKind::scale);
    v.without_effect(name(std::string(matrix) + ".input_scale"), n_expert, TensorKind::scale);
  }
  if (extra.scales_applied && !fused) {
    if (!gateless) {
      v.vector(gate_scale, name("ffn_gate_exps.scale"), n_expert, TensorKind::scale, false);
    }
    v.vector(up_scale, name("ffn_up_exps.scale"), n_expert, TensorKind::scale, false);
  }
  if (extra.scales_applied) {
    v.vector(down_scale, name("ffn_down_exps.scale"), n_expert, TensorKind::scale, false);
  }
  if (extra.expert_biases) {
    v.table(gate_b, name("ffn_gate_exps.bias"), n_ff, n_expert, TensorKind::bias);
    v.table(up_b, name("ffn_up_exps.bias"), n_ff, n_expert, TensorKind::bias);
    v.table(down_b, name("ffn_down_exps.bias"), width, n_expert, TensorKind::bias);
  }
  if (extra.selection_bias || extra.selection_bias_required) {
    v.vector(selection_bias, name(extra.selection_bias_name), n_expert, TensorKind::router,
             extra.selection_bias_required);
  }
  shared_expert = extra.shared_expert;
  if (shared_expert == SharedExpert::gated) {
    v.vector(shared_router, name("ffn_gate_inp_shexp.weight"), hp.n_embd, TensorKind::router);
  }
  if (shared_expert != SharedExpert::none) {
    shared.visit(v, hp, layer,
                 {.gated = extra.activation != ExpertActivation::relu_sqr,
                  .scales_applied = extra.shared_scales_applied,
                  .suffix = "_shexp",
                  .width = hp.n_ff_shared_expert});
  }
}

void moe_ffn(const MoeWeights& w, const ModelHParams& hp, int64_t layer, int64_t n_rows,
             ForwardContext& ctx, ConstTensor in, Tensor out, ConstTensor router_in) {
  auto& buf = ctx.buffers.of<MoeScratch>();
  Backend& backend = ctx.backend;
  const auto rows = static_cast<size_t>(n_rows);
  const auto n_expert = static_cast<size_t>(hp.n_expert);
  const auto k = static_cast<size_t>(hp.n_expert_used);
  const auto n_embd = static_cast<size_t>(hp.n_embd);

  // The router's scores come to the host, which routes: a device waits
  // here for the layer's work so far, once per MoE layer.
  const Tensor scores = backend.scratch(buf.scores, rows * n_expert);
  backend.matmul(w.router, router_in.empty() ? in : router_in, n_rows, scores, hp.n_expert);
  backend.add_bias_rows(scores, w.router_bias);
  const auto probs = ForwardBuffers::take(buf.probs, rows * n_expert);
  backend.copy_to_host(scores, probs);
  auto& chosen = buf.chosen;
  chosen.resize(rows * k);
  const auto weights = ForwardBuffers::take(buf.weights, rows * k);
  for (size_t r = 0; r < rows; ++r) {
    route(probs.subspan(r * n_expert, n_expert), hp.router, std::span(chosen).subspan(r * k, k),
          weights.subspan(r * k, k), w.selection_bias);
  }
  const Tensor slot_weights = backend.scratch(buf.slot_weights, rows * k);
  backend.copy_from_host(weights, slot_weights);

  // Nemotron 3 Super's experts read and sum in a latent width.
  const bool latent = !w.latent_down.empty();
  const auto width = static_cast<size_t>(w.width);
  ConstTensor expert_in = in;
  if (latent) {
    const Tensor down = backend.scratch(buf.latent_in, rows * width);
    backend.matmul(w.latent_down, in, n_rows, down, w.width);
    expert_in = down;
  }
  // Slot r * k + j gets row r's output of its j-th expert times weight
  // r * k + j.
  const Tensor slots = backend.scratch(buf.slots, rows * k * width);
  if (w.weights_before_experts) {
    // Llama 4 (llama.cpp's weight_before_ffn): each slot's expert reads
    // its row times its weight, and its output is not weighed again.
    const Tensor inputs = backend.scratch(buf.weighted_in, rows * k * width);
    auto& slot_rows = buf.rows;
    slot_rows.resize(rows * k);
    for (size_t slot = 0; slot < rows * k; ++slot) slot_rows[slot] = static_cast<int32_t>(slot / k);
    backend.gather_rows(expert_in, slot_rows, inputs, width);
    backend.scale_rows(inputs, slot_weights, width);
    grouped_experts(w, hp, ctx, chosen, inputs, slots, /*input_per_slot=*/true);
  } else {
    if (rows == 1) {
      one_row_experts(w, hp, ctx, chosen, expert_in, slots);
    } else {
      grouped_experts(w, hp, ctx, chosen, expert_in, slots, /*input_per_slot=*/false);
    }
    backend.scale_rows(slots, slot_weights, width);
  }
  // The slots in order, as llama.cpp folds them: ((s0 + s1) + s2) + ...
  const Tensor sums =
      latent ? backend.scratch(buf.latent_out, rows * width) : out.first(rows * n_embd);
  backend.sum_row_groups(slots, k, sums, width);
  if (latent) backend.matmul(w.latent_up, sums, n_rows, out, hp.n_embd);

  if (w.shared_expert == SharedExpert::none) return;
  // out += shared_ffn(x), gated (Qwen2-MoE) by sigmoid(shared_router . x).
  const Tensor shared = backend.scratch(buf.out, rows * n_embd);
  const FfnActivation shared_activation =
      w.activation == ExpertActivation::relu_sqr ? FfnActivation::relu_sqr : FfnActivation::swiglu;
  ffn(w.shared, shared_activation, hp, layer, n_rows, ctx, in, shared);
  if (w.shared_expert == SharedExpert::gated) {
    backend.scale_rows(shared, shared_expert_gates(w, hp, n_rows, ctx, in), n_embd);
  }
  backend.add(out.first(rows * n_embd), shared);
}

}  // namespace cortiq
