// AI2's OLMo 2 and Olmo 3 (`olmo2`): a decoder whose only norms sit after
// each branch ("post-norm" residuals), with RMS norms on Q and K, NeoX RoPE
// and SwiGLU. llama.cpp runs LG's EXAONE 4.0 on the same graph (exaone4.cpp,
// through olmo2.hpp), so its differences are noted here too:
//
//   x = token_embd[token]
//   for each layer:
//     x += rms_norm(attention(x)) * attn_post_norm
//              q, k = rms_norm(q) * attn_q_norm, rms_norm(k) * attn_k_norm
//              before RoPE: olmo2 over the whole projection, exaone4 per head
//     x += rms_norm(down(silu(gate(x)) * up(x))) * ffn_post_norm
//   logits = output(rms_norm(x) * output_norm)
//
// olmo2: output.weight always its own; Q/K/V projected bare (llama.cpp reads
// their optional biases and scales but its graph adds none). Olmo 3 adds
// sliding windows (attention.sliding_window; three local layers per global
// one) whose RoPE drops the YaRN scaling.
// exaone4: the output may be tied; Q/K/V with their biases and scales. The
// 64-layer model (32B) has 4096-position windows, three local layers per
// global one, and its global layers use no RoPE at all.
#include <algorithm>
#include <memory>
#include <variant>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/olmo2.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct PostNormLayer {
  AttentionWeights attn;
  std::vector<float> attn_post_norm;
  FfnWeights ffn;
  std::vector<float> ffn_post_norm;
};

struct PostNormWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PostNormLayer> layers;

  // As llama.cpp's load_arch_tensors of each.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const bool olmo2 = hp.arch == "olmo2";
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, olmo2 ? OutputMatrix::own : OutputMatrix::own_or_tied);
    if (!olmo2) rope.visit(v, hp);
    const auto norm = [&](std::vector<float>& w, int64_t il, const char* name) {
      v.vector(w, layer_tensor_name(il, name), hp.n_embd, TensorKind::norm);
    };
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      PostNormLayer& layer = layers.emplace_back();
      layer.attn.visit(v, hp, il,
                       {.qkv_effect = olmo2 ? QkvEffect::none : QkvEffect::applied,
                        .qk_norm = QkNorm::required,
                        .qk_norm_shape = olmo2 ? QkNormShape::whole : QkNormShape::head});
      norm(layer.attn_post_norm, il, "post_attention_norm.weight");
      layer.ffn.visit(v, hp, il, {.biases = false, .scales_applied = false});
      norm(layer.ffn_post_norm, il, "post_ffw_norm.weight");
    }
  }
};

class PostNormModel final : public FamilyModel<PostNormWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const PostNormLayer& layer = w_.layers[static_cast<size_t>(il)];
      attention(layer.attn, h, il, pass, cache, ctx, x, branch);
      add_post_normed(ctx, x, branch, layer.attn_post_norm);
      ffn(layer.ffn, FfnActivation::swiglu, h, il, static_cast<int64_t>(n), ctx, x, branch);
      add_post_normed(ctx, x, branch, layer.ffn_post_norm);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // x += rms_norm(branch) * post_norm.
  void add_post_normed(ForwardContext& ctx, Tensor x, Tensor branch,
                       std::span<const float> post_norm) const {
    const auto rows = branch.first(x.size());
    ctx.backend.rms_norm_rows(rows, post_norm, hparams_.rms_eps, rows,
                              static_cast<size_t>(hparams_.n_embd));
    ctx.backend.add(x, rows);
  }
};

}  // namespace

namespace olmo2_graph {

// What both graphs assume (llama.cpp asserts it or shapes its tensors so):
// heads of n_embd / n_head, rotated in full, and the norm epsilon given.
// Their scores are always scaled by 1/sqrt(head_dim): attention.scale is
// not read.
void read_common(const HParamReader& keys, ModelHParams& hp) {
  if (!keys.has("attention.layer_norm_rms_epsilon")) {
    throw Error(keys.file().path() + ": missing key " +
                keys.key("attention.layer_norm_rms_epsilon"));
  }
  if (hp.head_dim_k * hp.n_head != hp.n_embd || hp.head_dim_v != hp.head_dim_k ||
      hp.rope.n_dims != hp.head_dim_k) {
    keys.invalid("heads must be n_embd / n_head wide and rotated in full");
  }
  for (const LayerSpec& layer : hp.layers) {
    if (layer.n_head != hp.n_head || layer.n_head_kv != hp.n_head_kv) {
      keys.invalid("per-layer head counts are not supported");
    }
  }
  hp.attention_scale = 0.0f;
}

// The period of local and global layers: llama.cpp reads a number, and
// ignores an array (what converters write: one flag per layer).
int64_t window_period(const HParamReader& keys) {
  const gguf::Value* value = keys.file().find(keys.key("attention.sliding_window_pattern"));
  if (value != nullptr && value->as_array() != nullptr) return 4;
  return keys.uint_or("attention.sliding_window_pattern", 4);
}

std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder) {
  return make_model<PostNormModel>(std::move(hparams), binder);
}

std::vector<TensorSpec> tensors(const ModelHParams& hparams) {
  return tensors_of<PostNormWeights>(hparams);
}

}  // namespace olmo2_graph

namespace {

using namespace olmo2_graph;

void read_olmo2(const HParamReader& keys, ModelHParams& hp) {
  read_common(keys, hp);
  // llama.cpp's olmo2 reads no rope_freqs, so llama3 scaling would change
  // nothing there but the frequencies here.
  if (hp.rope.scaling == RopeScalingType::llama3) {
    keys.invalid("llama3 RoPE scaling is not supported");
  }
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  if (hp.sliding_window > 0) {
    // Local layers rotate without YaRN (llama.cpp's graph passes freq_scale
    // 1, ext_factor 0, attn_factor 1) at the global base: the graph ignores
    // rope.freq_base_swa.
    hp.rope_local.freq_scale = 1.0f;
    hp.rope_local.ext_factor = 0.0f;
    hp.rope_local.attn_factor = 1.0f;
    set_sliding_window_pattern(hp, hp.sliding_window, window_period(keys), RopeSlot::local);
  }
}

// Olmo 3's window keys (its converter writes the pattern as one flag per
// layer: three local, one global), with a window shorter than the golden
// sequences.
void write_olmo2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "olmo2.";
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  gguf::Array pattern = gguf::Array::of(gguf::ValueType::boolean);
  auto& flags = std::get<std::vector<bool>>(pattern.items);
  for (int64_t il = 0; il < g.n_layer; ++il) flags.push_back((il + 1) % 4 != 0);
  keys.push_back({p + "attention.sliding_window_pattern", gguf::Value(std::move(pattern))});
}

}  // namespace

const Family kOlmo2Family{.arch = "olmo2",
                          .neox_rope = true,
                          .make = olmo2_graph::make,
                          .read_hparams = read_olmo2,
                          .tensors = olmo2_graph::tensors,
                          .write_hparams = write_olmo2,
                          .fixed_head_dim = true};

}  // namespace cortiq
