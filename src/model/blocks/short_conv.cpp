#include "model/blocks/short_conv.hpp"

#include "kernels/cpu/causal_conv.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kv/kv_cache.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void ShortConvWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  v.table(kernel, layer_tensor_name(layer, "shortconv.conv.weight"), hp.shortconv_taps, hp.n_embd,
          TensorKind::conv);
  v.matrix(in_proj, layer_tensor_name(layer, "shortconv.in_proj.weight"), hp.n_embd, 3 * hp.n_embd);
  v.matrix(out_proj, layer_tensor_name(layer, "shortconv.out_proj.weight"), hp.n_embd, hp.n_embd);
}

namespace {

// One row through the convolution: y = c * conv(b * x), the sequence's state
// shifted by one input (kTaps 0: `taps` at run time; else unrolled).
template <size_t kTaps>
void convolve_row(std::span<const float> kernel, size_t taps, std::span<const float> bcx,
                  std::span<float> state, std::span<float> y) {
  const size_t n_embd = y.size();
  const float* b = bcx.data();
  const float* c = b + n_embd;
  const float* x = c + n_embd;
  for (size_t ch = 0; ch < n_embd; ++ch) {
    float* held = state.data() + ch * (taps - 1);
    const float* k = kernel.data() + ch * taps;
    if constexpr (kTaps == 0) {
      y[ch] = c[ch] * kernels::causal_conv_step(held, k, taps, b[ch] * x[ch]);
    } else {
      y[ch] = c[ch] * kernels::causal_conv_step<kTaps>(held, k, b[ch] * x[ch]);
    }
  }
}

}  // namespace

void short_conv(const ShortConvWeights& w, const ModelHParams& hp, int64_t layer,
                std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("the short convolution");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const size_t n_rows = rows.size();
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto n = static_cast<int64_t>(n_rows);
  const auto bcx = ForwardBuffers::take(buf.qkv, n_rows * 3 * n_embd);
  ctx.backend.matmul(w.in_proj, in.first(n_rows * n_embd), n, bcx, 3 * hp.n_embd);
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * n_embd);
  const auto taps = static_cast<size_t>(hp.shortconv_taps);
  // LFM2's converters write 3 taps (conv_L_cache).
  const auto convolve = taps == 3 ? convolve_row<3> : convolve_row<0>;
  for (size_t r = 0; r < n_rows; ++r) {
    convolve(w.kernel, taps, bcx.subspan(r * 3 * n_embd, 3 * n_embd),
             cache.state(layer, rows[r].seq), y.subspan(r * n_embd, n_embd));
  }
  ctx.backend.matmul(w.out_proj, y, n, out.first(n_rows * n_embd), hp.n_embd);
}

}  // namespace cortiq
