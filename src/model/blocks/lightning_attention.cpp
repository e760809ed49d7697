#include "model/blocks/lightning_attention.hpp"

#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/head_states.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void LightningAttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const int64_t width = hp.n_head * hp.head_dim_k;
  v.vector(norm, name("attn_norm_2.weight"), width, TensorKind::norm);
  v.matrix(qkv, name("attn_qkv.weight"), hp.n_embd, 3 * width);
  v.matrix(gate, name("attn_gate.weight"), hp.n_embd, width);
  v.matrix(out, name("attn_output.weight"), width, hp.n_embd);
  for (const char* scaled : {"attn_qkv", "attn_output"}) {
    v.scale_without_effect(name(std::string(scaled) + ".scale"));
    v.scale_without_effect(name(std::string(scaled) + ".input_scale"));
  }
}

namespace {

// Each head's decay per row, exp(-s_j * (1 - l / (L - 1) + 1e-5)), with
// the slopes and the layer's scale rounded as llama.cpp's graph input and
// ggml_scale round them. For a head count that is not a power of two this
// is llama.cpp's formula, not the reference's (which interleaves the slopes
// of the next power of two); MiniMax-Text-01 has 64 heads.
std::vector<float> head_decays(const ModelHParams& hp, int64_t layer) {
  const auto n_head = static_cast<float>(hp.n_head);
  const float start = std::pow(2.0f, -std::pow(2.0f, -(std::log2(n_head) - 3.0f)));
  const auto layer_scale = static_cast<float>(
      1.0 - 1.0 * static_cast<double>(layer) / static_cast<double>(hp.n_layer - 1) + 1e-5);
  std::vector<float> decays(static_cast<size_t>(hp.n_head));
  for (size_t j = 0; j < decays.size(); ++j) {
    const float slope = start * std::pow(start, static_cast<float>(j));
    decays[j] = std::exp(-slope * layer_scale);
  }
  return decays;
}

// One row of one head: o = (lambda q) · S + (q · k) v, then S = lambda S + k vᵀ.
void lightning_step(float* state, const float* q, const float* k, const float* v, float lambda,
                    float* o, size_t d) {
  float qk = 0.0f;
  for (size_t a = 0; a < d; ++a) qk += q[a] * k[a];
  for (size_t b = 0; b < d; ++b) o[b] = 0.0f;
  for (size_t a = 0; a < d; ++a) {
    const float qa = q[a] * lambda;
    float* row = state + a * d;
    for (size_t b = 0; b < d; ++b) o[b] += qa * row[b];
    for (size_t b = 0; b < d; ++b) row[b] = row[b] * lambda + k[a] * v[b];
  }
  for (size_t b = 0; b < d; ++b) o[b] += qk * v[b];
}

}  // namespace

void lightning_attention(const LightningAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                         std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                         ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("lightning attention");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto d = static_cast<size_t>(hp.head_dim_k);
  const auto n_head = static_cast<size_t>(hp.n_head);
  const size_t width = n_head * d;
  const auto x = in.first(n_rows * static_cast<size_t>(hp.n_embd));
  const auto qkv = ForwardBuffers::take(buf.qkv, n_rows * 3 * width);
  const auto gate = ForwardBuffers::take(buf.q, n_rows * width);
  const MatmulProduct products[] = {{&w.qkv, qkv, static_cast<int64_t>(3 * width)},
                                    {&w.gate, gate, static_cast<int64_t>(width)}};
  ctx.backend.matmul_shared_input(products, x, n);
  kernels::silu_inplace(qkv);
  const std::vector<float> decays = head_decays(hp, layer);
  const auto o = ForwardBuffers::take(buf.attn_out, n_rows * width);
  step_heads_in_row_order(
      rows, layer, cache, ctx.host_pool(), 0, n_head, d, [&](float* matrix, size_t r, size_t h) {
        const float* q = qkv.data() + r * 3 * width + h * 3 * d;
        lightning_step(matrix, q, q + d, q + 2 * d, decays[h], o.data() + r * width + h * d, d);
      });
  ctx.backend.rms_norm_rows(o, w.norm, hp.rms_eps, o, width);
  for (size_t i = 0; i < o.size(); ++i) o[i] = kernels::sigmoid(gate[i]) * o[i];
  ctx.backend.matmul(w.out, o, n, out.first(n_rows * static_cast<size_t>(hp.n_embd)), hp.n_embd);
}

}  // namespace cortiq
