// The Llama family: Llama 2 / 3.x, Mistral, TinyLlama, SmolLM2 (`llama`),
// Qwen2 / Qwen2.5 (`qwen2`: Q/K/V biases) and Qwen3 (`qwen3`: per-head RMS
// norms on Q and K). A pre-norm decoder:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     GQA, RoPE (adjacent pairs
//                                                 for llama, NeoX for qwen)
//     x += down(silu(gate(h)) * up(h)),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if tied
//
// The differences between the three are in the tensors a file carries
// (biases, q/k norms), which the shared blocks pick up when present.
#include <memory>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/attention_block.hpp"
#include "model/families.hpp"
#include "model/gated_ffn.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

class LlamaModel final : public DecoderModel {
 public:
  LlamaModel(const gguf::GgufFile& file, ModelHParams hp) : DecoderModel(std::move(hp)) {
    const WeightBinder b(file, &packed_weights_);
    auto& h = hparams_;
    if (h.n_vocab == 0) {
      const auto* embd = file.find_tensor("token_embd.weight");
      if (embd && embd->shape.size() == 2) h.n_vocab = embd->shape[1];
    }
    if (h.n_vocab <= 0) throw Error(file.path() + ": cannot tell the vocabulary size");
    token_embd_ = b.matrix("token_embd.weight", h.n_embd, h.n_vocab);
    output_norm_ = b.vector("output_norm.weight", h.n_embd);
    output_ = b.has("output.weight") ? b.matrix("output.weight", h.n_embd, h.n_vocab) : token_embd_;
    setup_rope(h, b, rope_);
    // No reserve: an absurd block_count must fail at the first missing
    // tensor, not in a huge allocation.
    for (int64_t il = 0; il < h.n_layer; ++il) {
      layers_.push_back({AttentionWeights::bind(b, h, il), GatedFfnWeights::bind(b, h, il)});
    }
  }

 private:
  struct Layer {
    AttentionWeights attn;
    GatedFfnWeights ffn;
  };

  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    auto& buf = ctx.buffers;
    const auto n = rows.size();
    const auto n_embd = static_cast<size_t>(h.n_embd);
    auto x = ForwardBuffers::take(buf.residual, n * n_embd);
    embed(rows, x, buf);

    const auto rope_dims = static_cast<size_t>(rope_.params.n_dims);
    auto rope_cache = ForwardBuffers::take(buf.rope, n * rope_dims);
    for (size_t r = 0; r < n; ++r) {
      kernels::rope_cache(rows[r].pos, rope_.params, rope_cache.subspan(r * rope_dims, rope_dims));
    }
    const AttentionPass pass{rows, cells, rope_.params, rope_cache};
    for (int64_t il = 0; il < h.n_layer; ++il) {
      const auto& layer = layers_[static_cast<size_t>(il)];
      attention_block(layer.attn, h, il, pass, cache, ctx, x);
      gated_ffn_block(layer.ffn, h, static_cast<int64_t>(n), ctx, x);
    }
    head(rows, x, ctx, logits);
  }

  void embed(std::span<const BatchRow> rows, std::span<float> x, ForwardBuffers& buf) const {
    auto& ids = buf.token_ids;
    ids.clear();
    for (const auto& row : rows) ids.push_back(row.token);
    kernels::get_rows(token_embd_, ids, x);
  }

  // Final norm and lm_head for the rows that want output only (the normed
  // rows themselves when the caller asks for hidden states).
  void head(std::span<const BatchRow> rows, std::span<const float> x, ForwardContext& ctx,
            std::span<float> logits) const {
    auto& buf = ctx.buffers;
    const auto n_embd = static_cast<size_t>(hparams_.n_embd);
    size_t n_out = 0;
    for (const auto& row : rows) n_out += row.logits ? 1 : 0;
    if (n_out == 0) return;
    const bool hidden = ctx.output == RowOutput::hidden;
    auto normed =
        hidden ? logits.first(n_out * n_embd) : ForwardBuffers::take(buf.normed, n_out * n_embd);
    size_t k = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (!rows[r].logits) continue;
      kernels::rms_norm(x.subspan(r * n_embd, n_embd), output_norm_, hparams_.rms_eps,
                        normed.subspan(k++ * n_embd, n_embd));
    }
    if (hidden) return;
    kernels::matmul(output_, normed, static_cast<int64_t>(n_out), logits, hparams_.n_vocab,
                    ctx.pool, buf.matmul);
  }

  kernels::WeightView token_embd_, output_;
  std::vector<float> output_norm_;
  RopeSetup rope_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<DecoderModel> make_llama_model(const gguf::GgufFile& file, ModelHParams hp) {
  return std::make_unique<LlamaModel>(file, std::move(hp));
}

}  // namespace cortiq
