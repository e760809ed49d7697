#include "model/blocks/kimi_delta_attention.hpp"

#include <cmath>
#include <string>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/delta_rule.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/causal_conv_rows.hpp"
#include "model/blocks/head_states.hpp"
#include "model/hparams.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void KimiDeltaAttentionWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const auto& s = hp.ssm;
  const int64_t d = s.d_state, width = s.d_inner;  // width = H d
  v.matrix(q, name("attn_q.weight"), hp.n_embd, width);
  v.matrix(k, name("attn_k.weight"), hp.n_embd, width);
  v.matrix(this->v, name("attn_v.weight"), hp.n_embd, width);
  // llama.cpp's loader reads these biases and its graph adds none.
  for (const char* bias : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
    v.without_effect(name(bias), width, TensorKind::bias);
  }
  // Written [taps, 1, channels, 1] by llama.cpp's converter (or without
  // the last 1 once quantized); one kernel per channel, q's, k's, v's.
  std::vector<float> parts[3];
  const char* conv_names[] = {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"};
  conv.clear();
  for (int i = 0; i < 3; ++i) {
    v.shaped(parts[i], name(conv_names[i]), {s.conv_taps, 1, width, 1}, TensorKind::conv);
    conv.insert(conv.end(), parts[i].begin(), parts[i].end());
  }
  v.matrix(f_a, name("ssm_f_a.weight"), hp.n_embd, d);
  v.matrix(f_b, name("ssm_f_b.weight"), d, width);
  v.matrix(beta, name("ssm_beta.weight"), hp.n_embd, s.n_head);
  v.shaped(a, name("ssm_a"), {1, s.n_head}, TensorKind::decay);  // no ".weight" (llama.cpp's name)
  v.vector(dt_bias, name("ssm_dt.bias"), width, TensorKind::bias);
  v.matrix(g_a, name("ssm_g_a.weight"), hp.n_embd, d);
  v.matrix(g_b, name("ssm_g_b.weight"), d, width);
  v.vector(norm, name("ssm_norm.weight"), d, TensorKind::norm);
  v.matrix(out, name("attn_output.weight"), width, hp.n_embd);
  // Its generic pass reads the projections' scales too; this graph applies none.
  for (const char* projection : {"attn_q", "attn_k", "attn_v", "attn_output", "ssm_beta"}) {
    v.scale_without_effect(name(std::string(projection) + ".scale"));
    v.scale_without_effect(name(std::string(projection) + ".input_scale"));
  }
}

void read_kimi_delta_attention_hparams(const HParamReader& keys, ModelHParams& hp) {
  auto& s = hp.ssm;
  s.conv_taps = keys.required_uint("ssm.conv_kernel");
  s.d_state = keys.required_uint("kda.head_dim");
  s.n_head = hp.n_head;  // llama.cpp's n_head(): the first layer's head count
  s.n_group = s.n_head;
  if (s.conv_taps < 2 || s.conv_taps > 1024) keys.invalid("ssm.conv_kernel must be 2 to 1024");
  if (s.d_state <= 0 || s.d_state > 4096) keys.invalid("kda.head_dim must be 1 to 4096");
  if (s.n_head <= 0) keys.invalid("the first layer's attention.head_count must be positive");
  s.d_inner = s.n_head * s.d_state;
}

namespace {

// The delta rule of every row in order, heads in parallel (each head's
// matrix its own): qkv [rows][q | k | v], beta [rows][H], decay [rows][H d],
// o [rows][H d].
void delta_rule_rows(const ModelHParams& hp, std::span<const BatchRow> rows, int64_t layer,
                     KvCache& cache, ThreadPool& pool, std::span<const float> qkv,
                     std::span<const float> beta, std::span<const float> decay,
                     std::span<float> o) {
  const auto& s = hp.ssm;
  const auto d = static_cast<size_t>(s.d_state);
  const auto n_head = static_cast<size_t>(s.n_head);
  const auto width = static_cast<size_t>(s.d_inner);
  const auto conv_floats = static_cast<size_t>(s.conv_taps - 1) * 3 * width;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  step_heads_in_row_order(
      rows, layer, cache, pool, conv_floats, n_head, d, [&](float* matrix, size_t r, size_t h) {
        const float* q = qkv.data() + r * 3 * width + h * d;
        const size_t at = r * width + h * d;
        kernels::delta_rule_step_keyed(matrix, q, q + width, q + 2 * width, beta[r * n_head + h],
                                       decay.data() + at, scale, o.data() + at,
                                       static_cast<int64_t>(d));
      });
}

}  // namespace

void kimi_delta_attention(const KimiDeltaAttentionWeights& w, const ModelHParams& hp, int64_t layer,
                          std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                          ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("Kimi Delta Attention");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto d = static_cast<size_t>(s.d_state);
  const auto n_head = static_cast<size_t>(s.n_head);
  const auto width = static_cast<size_t>(s.d_inner);
  const auto x = in.first(n_rows * n_embd);

  // q | k | v side by side in each row (the convolution's channels), the
  // gates' low-rank inputs and beta: one pass over x.
  const auto qkv = ForwardBuffers::take(buf.qkv, n_rows * 3 * width);
  const auto f_low = ForwardBuffers::take(buf.latent_a, n_rows * d);
  const auto g_low = ForwardBuffers::take(buf.latent_b, n_rows * d);
  const auto beta = ForwardBuffers::take(buf.k, n_rows * n_head);
  const auto stride = static_cast<int64_t>(3 * width);
  const MatmulProduct products[] = {{&w.q, qkv, stride},
                                    {&w.k, qkv.subspan(width), stride},
                                    {&w.v, qkv.subspan(2 * width), stride},
                                    {&w.f_a, f_low, s.d_state},
                                    {&w.g_a, g_low, s.d_state},
                                    {&w.beta, beta, s.n_head}};
  ctx.backend.matmul_shared_input(products, x, n);
  for (float& b : beta) b = kernels::sigmoid(b);

  // The per-channel decay exp(A[h] * softplus(f_b · f_low + dt_bias)), as
  // llama.cpp's add, softplus, mul and the fused op's expf.
  const auto decay = ForwardBuffers::take(buf.v, n_rows * width);
  ctx.backend.matmul(w.f_b, f_low, n, decay, s.d_inner);
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t c = 0; c < width; ++c) {
      float& g = decay[r * width + c];
      g = std::exp(kernels::softplus(g + w.dt_bias[c]) * w.a[c / d]);
    }
  }
  const auto gate = ForwardBuffers::take(buf.attn_gate, n_rows * width);
  ctx.backend.matmul(w.g_b, g_low, n, gate, s.d_inner);

  causal_conv_silu_rows({w.conv, {}, static_cast<size_t>(s.conv_taps), 3 * width}, rows, layer,
                        cache, ctx.host_pool(), qkv.data(), 3 * width);
  for (size_t r = 0; r < n_rows; ++r) {
    float* q = qkv.data() + r * 3 * width;
    for (size_t h = 0; h < n_head; ++h) {
      kernels::l2_norm({q + h * d, d}, hp.rms_eps);
      kernels::l2_norm({q + width + h * d, d}, hp.rms_eps);
    }
  }
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * width);
  delta_rule_rows(hp, rows, layer, cache, ctx.host_pool(), qkv, beta, decay, y);
  // y = rms_norm(o) * ssm_norm * sigmoid(gate), per head.
  ctx.backend.rms_norm_rows(y, w.norm, hp.rms_eps, y, d);
  for (size_t i = 0; i < y.size(); ++i) y[i] *= kernels::sigmoid(gate[i]);
  ctx.backend.matmul(w.out, y, n, out.first(n_rows * n_embd), hp.n_embd);
}

}  // namespace cortiq
