#include "model/blocks/gated_delta_net.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/delta_rule.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/causal_conv_rows.hpp"
#include "model/blocks/head_states.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void GatedDeltaNetWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                                 GatedDeltaNetTensors extra) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const auto& s = hp.ssm;
  const int64_t value_dim = s.d_inner;
  tiled_key_heads = extra.qwen35;
  // A scale llama.cpp's graph applies (Qwen3.5) or only loads (Qwen3-Next).
  const auto scale = [&](float& value, const std::string& tensor) {
    if (extra.qwen35) {
      v.scale(value, tensor);
    } else {
      v.scale_without_effect(tensor);
    }
  };
  // Qwen3-Next's older converters wrote ssm_in instead of attn_qkv and
  // attn_gate. llama.cpp loads whichever the file has, both when it has
  // both, and then runs attn_qkv: ssm_in beside it is bound and unused.
  if (!extra.qwen35) {
    const bool qkv_in_file = v.has(name("attn_qkv.weight"), true);
    v.matrix(qkvz, name("ssm_in.weight"), hp.n_embd, s.conv_width() + value_dim, !qkv_in_file);
    v.scale_without_effect(name("ssm_in.scale"));
    v.scale_without_effect(name("ssm_in.input_scale"));
    if (qkv_in_file) unused_qkvz = std::exchange(qkvz, {});
  }
  if (qkvz.empty()) {
    v.matrix(qkv, name("attn_qkv.weight"), hp.n_embd, s.conv_width());
    v.matrix(z, name("attn_gate.weight"), hp.n_embd, value_dim);
    scale(qkv_scale, name("attn_qkv.scale"));
    scale(z_scale, name("attn_gate.scale"));
    v.scale_without_effect(name("attn_qkv.input_scale"));
    v.scale_without_effect(name("attn_gate.input_scale"));
  }
  v.table(conv, name("ssm_conv1d.weight"), s.conv_taps, s.conv_width(), TensorKind::conv);
  v.vector(dt_bias, name("ssm_dt.bias"), s.n_head, TensorKind::bias);
  v.vector(a, name("ssm_a"), s.n_head, TensorKind::decay);  // no ".weight" (llama.cpp's name)
  if (extra.qwen35) {
    v.matrix(beta, name("ssm_beta.weight"), hp.n_embd, s.n_head);
    v.matrix(alpha, name("ssm_alpha.weight"), hp.n_embd, s.n_head);
    scale(beta_scale, name("ssm_beta.scale"));
    scale(alpha_scale, name("ssm_alpha.scale"));
    v.scale_without_effect(name("ssm_beta.input_scale"));
    v.scale_without_effect(name("ssm_alpha.input_scale"));
  } else {
    v.matrix(beta_alpha, name("ssm_ba.weight"), hp.n_embd, 2 * s.n_head);
  }
  v.vector(norm, name("ssm_norm.weight"), s.d_state, TensorKind::norm);
  v.matrix(out, name("ssm_out.weight"), value_dim, hp.n_embd);
  scale(out_scale, name("ssm_out.scale"));
  v.scale_without_effect(name("ssm_out.input_scale"));
}

void read_gated_delta_net_hparams(const HParamReader& keys, ModelHParams& hp) {
  read_ssm_hparams(keys, hp);
  const auto& s = hp.ssm;
  if (s.d_inner != s.d_state * s.n_head) {
    keys.invalid(
        "ssm.inner_size must be ssm.state_size x ssm.time_step_rank (value heads as wide "
        "as key heads)");
  }
}

namespace {

// Qwen3-Next's fused ssm_in row (per key head: q, k, its value heads' v,
// their z) rearranged into q | k | v and z, as llama.cpp's legacy path.
void split_qkvz(const ModelHParams::Ssm& s, std::span<const float> fused, std::span<float> qkv,
                std::span<float> z) {
  const auto dk = static_cast<size_t>(s.d_state);
  const auto n_k = static_cast<size_t>(s.n_group);
  const size_t dv = static_cast<size_t>(s.d_inner) / n_k;  // a key head's values
  const size_t group = 2 * dk + 2 * dv;
  for (size_t kh = 0; kh < n_k; ++kh) {
    const float* src = fused.data() + kh * group;
    std::copy_n(src, dk, qkv.data() + kh * dk);
    std::copy_n(src + dk, dk, qkv.data() + n_k * dk + kh * dk);
    std::copy_n(src + 2 * dk, dv, qkv.data() + 2 * n_k * dk + kh * dv);
    std::copy_n(src + 2 * dk + dv, dv, z.data() + kh * dv);
  }
}

// Each key head's q and k of every row, L2-normed.
void normalize_keys(const ModelHParams& hp, size_t n_rows, std::span<float> qkv) {
  const auto& s = hp.ssm;
  const auto width = static_cast<size_t>(s.conv_width());
  const auto d = static_cast<size_t>(s.d_state);
  const auto n_k = static_cast<size_t>(s.n_group);
  for (size_t r = 0; r < n_rows; ++r) {
    float* q = qkv.data() + r * width;
    float* k = q + n_k * d;
    for (size_t kh = 0; kh < n_k; ++kh) {
      kernels::l2_norm({q + kh * d, d}, hp.rms_eps);
      kernels::l2_norm({k + kh * d, d}, hp.rms_eps);
    }
  }
}

// The delta rule of every row in order, value heads in parallel (each
// head's matrices its own): o [rows][d_inner].
void delta_rule_rows(const GatedDeltaNetWeights& w, const ModelHParams& hp,
                     std::span<const BatchRow> rows, int64_t layer, KvCache& cache,
                     ThreadPool& pool, std::span<const float> qkv, std::span<const float> beta,
                     std::span<const float> gate, std::span<float> o) {
  const auto& s = hp.ssm;
  const auto width = static_cast<size_t>(s.conv_width());
  const auto conv_floats = static_cast<size_t>(s.conv_taps - 1) * width;
  const auto d = static_cast<size_t>(s.d_state);
  const auto n_k = static_cast<size_t>(s.n_group);
  const auto n_v = static_cast<size_t>(s.n_head);
  const size_t per_key_head = n_v / n_k;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  step_heads_in_row_order(
      rows, layer, cache, pool, conv_floats, n_v, d, [&](float* matrix, size_t r, size_t h) {
        const float* q = qkv.data() + r * width;
        const float* k = q + n_k * d;
        const float* v = k + n_k * d;
        const size_t kh = w.tiled_key_heads ? h % n_k : h / per_key_head;
        kernels::delta_rule_step(matrix, q + kh * d, k + kh * d, v + h * d, beta[r * n_v + h],
                                 std::exp(gate[r * n_v + h]), scale, o.data() + r * n_v * d + h * d,
                                 static_cast<int64_t>(d));
      });
}

// beta and the decay's log for every row: [rows][H_v] each.
void beta_and_gate(const GatedDeltaNetWeights& w, const ModelHParams& hp, std::span<const float> in,
                   int64_t n, ForwardContext& ctx, std::span<float> beta, std::span<float> gate) {
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const auto n_v = static_cast<size_t>(s.n_head);
  const auto rows = static_cast<size_t>(n);
  if (!w.beta_alpha.empty()) {
    // Per key head: its value heads' b, then their a.
    const auto ba = ForwardBuffers::take(buf.latent_a, rows * 2 * n_v);
    ctx.backend.matmul(w.beta_alpha, in, n, ba, 2 * s.n_head);
    const size_t per_key_head = n_v / static_cast<size_t>(s.n_group);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t h = 0; h < n_v; ++h) {
        const size_t kh = h / per_key_head, j = h % per_key_head;
        const float* group = ba.data() + r * 2 * n_v + kh * 2 * per_key_head;
        beta[r * n_v + h] = group[j];
        gate[r * n_v + h] = group[per_key_head + j];
      }
    }
  } else {
    const MatmulProduct products[] = {{&w.beta, beta, s.n_head}, {&w.alpha, gate, s.n_head}};
    ctx.backend.matmul_shared_input(products, in, n);
    if (w.beta_scale != 1.0f) ctx.backend.scale(beta, w.beta_scale);
    if (w.alpha_scale != 1.0f) ctx.backend.scale(gate, w.alpha_scale);
  }
  for (size_t r = 0; r < rows; ++r) {
    for (size_t h = 0; h < n_v; ++h) {
      float& b = beta[r * n_v + h];
      b = kernels::sigmoid(b);
      float& g = gate[r * n_v + h];
      g = kernels::softplus(g + w.dt_bias[h]) * w.a[h];
    }
  }
}

}  // namespace

void gated_delta_net(const GatedDeltaNetWeights& w, const ModelHParams& hp, int64_t layer,
                     std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                     ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("the Gated DeltaNet");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto width = static_cast<size_t>(s.conv_width());
  const auto d_inner = static_cast<size_t>(s.d_inner);
  const auto n_v = static_cast<size_t>(s.n_head);
  const auto x = in.first(n_rows * n_embd);
  const auto qkv = ForwardBuffers::take(buf.qkv, n_rows * width);
  const auto z = ForwardBuffers::take(buf.q, n_rows * d_inner);
  if (!w.qkvz.empty()) {
    const auto fused = ForwardBuffers::take(buf.latent_b, n_rows * (width + d_inner));
    ctx.backend.matmul(w.qkvz, x, n, fused, s.conv_width() + s.d_inner);
    for (size_t r = 0; r < n_rows; ++r) {
      split_qkvz(s, fused.subspan(r * (width + d_inner), width + d_inner),
                 qkv.subspan(r * width, width), z.subspan(r * d_inner, d_inner));
    }
  } else {
    const MatmulProduct products[] = {{&w.qkv, qkv, s.conv_width()}, {&w.z, z, s.d_inner}};
    ctx.backend.matmul_shared_input(products, x, n);
    if (w.qkv_scale != 1.0f) ctx.backend.scale(qkv, w.qkv_scale);
    if (w.z_scale != 1.0f) ctx.backend.scale(z, w.z_scale);
  }
  const auto beta = ForwardBuffers::take(buf.k, n_rows * n_v);
  const auto gate = ForwardBuffers::take(buf.v, n_rows * n_v);
  beta_and_gate(w, hp, x, n, ctx, beta, gate);
  causal_conv_silu_rows({w.conv, {}, static_cast<size_t>(s.conv_taps), width}, rows, layer, cache,
                        ctx.host_pool(), qkv.data(), width);
  normalize_keys(hp, n_rows, qkv);
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * d_inner);
  delta_rule_rows(w, hp, rows, layer, cache, ctx.host_pool(), qkv, beta, gate, y);
  // y = rms_norm(o) * ssm_norm * silu(z), per value head.
  ctx.backend.rms_norm_rows(y, w.norm, hp.rms_eps, y, static_cast<size_t>(s.d_state));
  kernels::swiglu(z, y, y);  // y * silu(z), the product commuted: the same bits
  const auto out_rows = out.first(n_rows * n_embd);
  ctx.backend.matmul(w.out, y, n, out_rows, hp.n_embd);
  if (w.out_scale != 1.0f) ctx.backend.scale(out_rows, w.out_scale);
}

}  // namespace cortiq
