// Google's Gemma 4 text model (`gemma4`, dense: E2B, E4B, 31B): Gemma 3's
// sandwich-normed decoder of sliding-window and global layers, plus
// per-layer token embeddings, layers that reuse an earlier layer's keys and
// values, and its own head sizes for the two kinds of layers:
//
//   x = token_embd[token] * sqrt(n_embd)
//   per-layer inputs (when embedding_length_per_layer_input = P > 0), [n_layer][P]:
//     pl = (rms_norm_P(per_layer_model_proj · x / sqrt(n_embd)) * per_layer_proj_norm
//           + per_layer_token_embd[token] * sqrt(P)) / sqrt(2)
//   for each layer l (sliding-window or global, attention.sliding_window_pattern):
//     y = rms_norm(x) * attn_norm
//     q = rms_norm_head(attn_q · y) * attn_q_norm, RoPE          (no query scaling)
//     own keys:    k = rms_norm_head(attn_k · y) * attn_k_norm, RoPE
//                  v = rms_norm_head(attn_v · y)   (no weight; attn_k · y without attn_v)
//     shared_kv_layers (the last ones): no keys of their own; they attend over
//                  the cache of the last sliding-window / global layer with keys
//     h = attn_output · softmax(q k^T) v                         (scale 1)
//     x += rms_norm(h) * post_attention_norm
//     x += rms_norm(down(gelu_tanh(gate(y')) * up(y'))) * post_ffw_norm,
//          y' = rms_norm(x) * ffn_norm
//     with P > 0: x += rms_norm(proj · (gelu_tanh(inp_gate · x) * pl[l])) * post_norm
//     x *= layer_output_scale (when present)
//   logits = output(rms_norm(x) * output_norm)   output = token_embd if absent
//   logits = cap * tanh(logits / cap)            (final_logit_softcapping, when set)
//
// Sliding-window layers have their own head size (attention.key_length_swa),
// rotated dimensions (rope.dimension_count_swa) and RoPE base
// (rope.freq_base_swa, 10000) without position scaling; global layers use
// rope_freqs.weight (Gemma 4's "proportional" RoPE) as frequency factors.
// Per-tensor scales of Q/K/V/output and the FFN apply (llama.cpp's generic
// pass); the per-layer input projections have none. llama.cpp's bidirectional
// sliding-window attention (non_causal_type SWA_ONLY) only applies when a
// context runs non-causally (attention.causal = false, refused here), never
// to causal text generation. MoE layers (26B-A4B: blk.N.ffn_gate_inp.weight)
// are refused.
#include <algorithm>
#include <cmath>
#include <memory>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kv/kv_cache.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

// The first layer without keys of its own is n_layer - shared_kv_layers;
// such a layer reads the keys and values of the layer llama.cpp's cache
// reuses for it: the one two before that boundary for a sliding-window
// layer, the one just before it for a global layer. read_gemma4 checks that
// the source has the same kind and shape, and records the file's KV heads.
int64_t kv_source_of(const ModelHParams& hp, int64_t il, int64_t kv_layers) {
  if (il < kv_layers) return il;
  return kv_layers - (hp.layer(il).window > 0 ? 2 : 1);
}

// The first layer without keys of its own: the layers from there on carry no
// KV heads in their LayerSpec (so the cache keeps nothing for them).
int64_t kv_layer_count(const ModelHParams& hp) {
  int64_t n = hp.n_layer;
  while (n > 0 && hp.layer(n - 1).n_head_kv == 0) --n;
  return n;
}

struct Gemma4Layer {
  std::vector<float> attn_norm, attn_post_norm;
  kernels::WeightView wq, wk, wv, wo;
  float q_scale = 1, k_scale = 1, v_scale = 1, o_scale = 1;
  std::vector<float> q_norm, k_norm;
  int64_t kv_source = 0;  // the layer whose cache this one attends over
  std::vector<float> ffn_norm, ffn_post_norm;
  FfnWeights ffn;
  // Per-layer input: inp_gate [n_embd -> P], proj [P -> n_embd], post_norm.
  kernels::WeightView inp_gate, proj;
  std::vector<float> post_norm;
  std::vector<float> out_scale;  // layer_output_scale.weight: one value, or empty
};

struct Gemma4Weights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  kernels::WeightView per_layer_token_embd, per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  std::vector<Gemma4Layer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const int64_t pl = hp.per_layer_embd;
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    if (pl > 0) {
      v.matrix(per_layer_token_embd, "per_layer_token_embd.weight", pl * hp.n_layer, hp.n_vocab);
      v.matrix(per_layer_model_proj, "per_layer_model_proj.weight", hp.n_embd, pl * hp.n_layer);
      v.vector(per_layer_proj_norm, "per_layer_proj_norm.weight", pl, TensorKind::norm);
    }
    const int64_t kv_layers = kv_layer_count(hp);
    bool rope_freqs_read = false;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      const LayerSpec& spec = hp.layer(il);
      const auto name = [&](std::string_view what) { return layer_tensor_name(il, what); };
      const auto norm = [&](std::vector<float>& w, std::string_view what) {
        v.vector(w, name(what), hp.n_embd, TensorKind::norm);
      };
      Gemma4Layer& layer = layers.emplace_back();
      layer.kv_source = kv_source_of(hp, il, kv_layers);
      const bool own_kv = layer.kv_source == il;
      // A shared layer's optional K/V tensors have its source's shape (the
      // file's KV heads; read_gemma4 checked they agree).
      const LayerSpec& kv_spec = hp.layer(layer.kv_source);
      norm(layer.attn_norm, "attn_norm.weight");
      v.matrix(layer.wq, name("attn_q.weight"), hp.n_embd, spec.q_width());
      v.matrix(layer.wk, name("attn_k.weight"), hp.n_embd, kv_spec.k_width(), own_kv);
      v.matrix(layer.wv, name("attn_v.weight"), hp.n_embd, kv_spec.v_width(), false);
      v.matrix(layer.wo, name("attn_output.weight"), spec.attn_out_width(), hp.n_embd);
      v.vector(layer.q_norm, name("attn_q_norm.weight"), spec.head_dim_k, TensorKind::norm);
      v.vector(layer.k_norm, name("attn_k_norm.weight"), kv_spec.head_dim_k, TensorKind::norm,
               own_kv);
      norm(layer.attn_post_norm, "post_attention_norm.weight");
      v.vector(layer.out_scale, name("layer_output_scale.weight"), 1, TensorKind::scale, false);
      if (spec.window == 0 && !rope_freqs_read) {
        // Required once a global layer exists (llama.cpp creates it for the
        // first one and duplicates it for the others).
        rope.visit(v, hp, /*required=*/true);
        rope_freqs_read = true;
      }
      norm(layer.ffn_norm, "ffn_norm.weight");
      layer.ffn.visit(v, hp, il, {.biases = false, .scales_applied = true});
      norm(layer.ffn_post_norm, "post_ffw_norm.weight");
      if (v.has(name("ffn_gate_inp.weight"), false)) {
        throw Error("gemma4: " + name("ffn_gate_inp.weight") +
                    ": mixture-of-experts layers (Gemma 4 26B-A4B) are not supported");
      }
      if (pl > 0) {
        v.matrix(layer.inp_gate, name("inp_gate.weight"), hp.n_embd, pl);
        v.matrix(layer.proj, name("proj.weight"), pl, hp.n_embd);
        norm(layer.post_norm, "post_norm.weight");
      }
      // llama.cpp's generic pass: the scales of the projections there are
      // (a KV-shared layer's K and V projections are there for nothing).
      v.scale(layer.q_scale, name("attn_q.scale"));
      if (own_kv) {
        v.scale(layer.k_scale, name("attn_k.scale"));
        if (v.has(name("attn_v.weight"), true)) v.scale(layer.v_scale, name("attn_v.scale"));
      } else {
        for (const char* matrix : {"attn_k", "attn_v"}) {
          if (v.has(name(std::string(matrix) + ".weight"), true)) {
            v.scale_without_effect(name(std::string(matrix) + ".scale"));
          }
        }
      }
      v.scale(layer.o_scale, name("attn_output.scale"));
      for (const char* input : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
        v.scale_without_effect(name(std::string(input) + ".input_scale"));
      }
    }
  }
};

void scale_by(ForwardContext& ctx, Tensor x, float s) {
  if (s != 1.0f) ctx.backend.scale(x, s);
}

class Gemma4Model final : public FamilyModel<Gemma4Weights> {
 public:
  using FamilyModel::FamilyModel;

  int64_t kv_source_layer(int64_t il) const override {
    return w_.layers[static_cast<size_t>(il)].kv_source;
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = rows.size();
    const auto [x, normed, branch, pass] = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    const auto per_layer = per_layer_inputs(rows, token_embeddings(rows, x, normed, ctx), ctx);
    for (const int64_t il : ctx.stage.layers()) {
      const Gemma4Layer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, x, layer.attn_norm, normed);
      attention(layer, il, pass, cache, ctx, normed, branch);
      rms_norm(ctx, h, branch, layer.attn_post_norm, branch);
      ctx.backend.add(x, branch);
      rms_norm(ctx, h, x, layer.ffn_norm, normed);
      ffn(layer.ffn, FfnActivation::geglu, h, il, static_cast<int64_t>(n), ctx, normed, branch);
      rms_norm(ctx, h, branch, layer.ffn_post_norm, branch);
      ctx.backend.add(x, branch);
      if (!per_layer.empty()) add_per_layer_input(layer, il, per_layer, x, normed, ctx);
      if (!layer.out_scale.empty()) ctx.backend.scale(x, layer.out_scale[0]);
    }
    w_.head.apply(h, rows, x, ctx, logits);
  }

  // The rows' scaled token embeddings: x itself, or, in a stage that starts
  // from hidden states, the embeddings made again in `scratch` (when the
  // per-layer inputs need them).
  ConstTensor token_embeddings(std::span<const BatchRow> rows, ConstTensor x, Tensor scratch,
                               ForwardContext& ctx) const {
    if (ctx.stage.from_tokens() || hparams_.per_layer_embd == 0) return x;
    w_.embedding.embed(hparams_, rows, scratch, ctx);
    return scratch;
  }

  // The per-layer inputs of every row, [rows][n_layer][P] (empty without
  // per-layer embeddings), from the scaled token embeddings x.
  ConstTensor per_layer_inputs(std::span<const BatchRow> rows, ConstTensor x,
                               ForwardContext& ctx) const {
    const auto& h = hparams_;
    const int64_t pl = h.per_layer_embd;
    if (pl == 0) return {};
    auto& buf = ctx.buffers;
    auto& backend = ctx.backend;
    const auto n = static_cast<int64_t>(rows.size());
    const auto width = static_cast<size_t>(pl * h.n_layer);
    const auto rows_n = rows.size();
    const Tensor inputs = backend.scratch(buf.latent_a, rows_n * width);
    backend.matmul(w_.per_layer_model_proj, x.first(rows_n * static_cast<size_t>(h.n_embd)), n,
                   inputs, static_cast<int64_t>(width));
    backend.scale(inputs, 1.0f / std::sqrt(static_cast<float>(h.n_embd)));
    backend.rms_norm_rows(inputs, w_.per_layer_proj_norm, h.rms_eps, inputs,
                          static_cast<size_t>(pl));
    auto& ids = buf.token_ids;
    ids.clear();
    for (const auto& row : rows) ids.push_back(row.token);
    const Tensor embedded = backend.scratch(buf.latent_b, rows_n * width);
    backend.get_rows(w_.per_layer_token_embd, ids, embedded);
    backend.scale(embedded, std::sqrt(static_cast<float>(pl)));
    backend.add(inputs, embedded);
    backend.scale(inputs, 1.0f / std::sqrt(2.0f));
    return inputs;
  }

  // x += rms_norm(proj · (gelu(inp_gate · x) * per_layer[l])) * post_norm.
  // Runs after the layer's FFN, whose scratch (ForwardBuffers::up) holds
  // the layer's slice of the per-layer inputs.
  void add_per_layer_input(const Gemma4Layer& layer, int64_t il, ConstTensor per_layer, Tensor x,
                           Tensor scratch, ForwardContext& ctx) const {
    const auto& h = hparams_;
    auto& buf = ctx.buffers;
    auto& backend = ctx.backend;
    const auto pl = static_cast<size_t>(h.per_layer_embd);
    const auto rows = x.size() / static_cast<size_t>(h.n_embd);
    const auto n = static_cast<int64_t>(rows);
    const Tensor gate = backend.scratch(buf.latent_b, rows * pl);
    backend.matmul(layer.inp_gate, x, n, gate, static_cast<int64_t>(pl));
    backend.unary(UnaryOp::gelu, gate);
    const auto width = pl * static_cast<size_t>(h.n_layer);
    const Tensor inputs = backend.scratch(buf.up, rows * pl);
    backend.copy_rows(per_layer.subspan(static_cast<size_t>(il) * pl), width, inputs, pl, pl, rows);
    backend.scale_rows(gate, inputs, 1);
    backend.matmul(layer.proj, gate, n, scratch, h.n_embd);
    rms_norm(ctx, h, scratch, layer.post_norm, scratch);
    backend.add(x, scratch);
  }

  // The attention branch: Q/K/V with their norms (V's without weight, K's
  // projection when there is no attn_v), RoPE, the keys and values into the
  // layer's cache (a KV-shared layer has none), attention over the cache of
  // layer.kv_source, the output projection. out: [rows][n_embd].
  void attention(const Gemma4Layer& layer, int64_t il, const AttentionPass& pass, KvCache& cache,
                 ForwardContext& ctx, ConstTensor in, Tensor out) const {
    const auto& h = hparams_;
    auto& buf = ctx.buffers;
    auto& backend = ctx.backend;
    const LayerSpec& spec = h.layer(il);
    const auto rows = pass.rows.size();
    const auto n = static_cast<int64_t>(rows);
    const auto qw = static_cast<size_t>(spec.q_width());
    const RopeTable* rope =
        spec.rope == RopeSlot::none ? nullptr : &pass.rope[static_cast<size_t>(spec.rope)];
    const auto rotate = [&](Tensor heads, int64_t n_heads) {
      if (rope == nullptr) return;
      backend.rope_rows(heads, rows, n_heads, spec.head_dim_k, *rope->params, rope->cache);
    };
    const Tensor q = backend.scratch(buf.q, rows * qw);
    backend.matmul(layer.wq, in, n, q, static_cast<int64_t>(qw));
    scale_by(ctx, q, layer.q_scale);
    backend.rms_norm_rows(q, layer.q_norm, h.rms_eps, q, layer.q_norm.size());
    rotate(q, spec.n_head);

    if (layer.kv_source == il) {
      const auto kw = static_cast<size_t>(spec.k_width());
      const auto vw = static_cast<size_t>(spec.v_width());
      const Tensor k = backend.scratch(buf.k, rows * kw);
      const Tensor v = backend.scratch(buf.v, rows * vw);
      backend.matmul(layer.wk, in, n, k, static_cast<int64_t>(kw));
      scale_by(ctx, k, layer.k_scale);
      if (layer.wv.data != nullptr) {
        backend.matmul(layer.wv, in, n, v, static_cast<int64_t>(vw));
        scale_by(ctx, v, layer.v_scale);
      } else {
        backend.copy_rows(k, kw, v, vw, kw, rows);  // key and value heads have one size
      }
      backend.rms_norm_rows(k, layer.k_norm, h.rms_eps, k, layer.k_norm.size());
      backend.rms_norm_rows(v, {}, h.rms_eps, v, static_cast<size_t>(spec.head_dim_v));
      rotate(k, spec.n_head_kv);
      backend.store_kv(cache, il, pass.cells, k, v, kw, vw);
    }
    const Tensor attn =
        backend.scratch(buf.attn_out, rows * static_cast<size_t>(spec.attn_out_width()));
    attend_over_cache(h, layer.kv_source, pass, cache, ctx, q, attn);
    const auto out_rows = out.first(rows * static_cast<size_t>(h.n_embd));
    backend.matmul(layer.wo, attn, n, out_rows, h.n_embd);
    scale_by(ctx, out_rows, layer.o_scale);
  }
};

// attention.sliding_window_pattern: one flag per layer (bool or integer
// array), or one number for every layer (llama.cpp's get_key_or_arr).
std::vector<bool> sliding_window_layers(const HParamReader& keys, int64_t n_layer) {
  const std::string key = keys.key("attention.sliding_window_pattern");
  const gguf::Value* value = keys.file().find(key);
  if (value == nullptr) keys.invalid("missing key " + key);
  std::vector<bool> out(static_cast<size_t>(n_layer));
  if (const gguf::Array* array = value->as_array()) {
    if (static_cast<int64_t>(array->size()) != n_layer) {
      keys.invalid(key + " has " + std::to_string(array->size()) + " values for " +
                   std::to_string(n_layer) + " layers");
    }
    if (const auto* flags = array->as<bool>()) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = (*flags)[i];
    } else if (const auto* u = array->as<uint32_t>()) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = (*u)[i] != 0;
    } else if (const auto* s = array->as<int32_t>()) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = (*s)[i] != 0;
    } else {
      keys.invalid(key + " is not an array of flags");
    }
    return out;
  }
  const bool all = keys.uint_or("attention.sliding_window_pattern", 0) != 0;
  std::fill(out.begin(), out.end(), all);
  return out;
}

void read_gemma4(const HParamReader& keys, ModelHParams& hp) {
  // llama.cpp's get_key: required.
  for (const char* key : {"attention.layer_norm_rms_epsilon", "attention.sliding_window",
                          "embedding_length_per_layer_input", "attention.key_length_swa",
                          "attention.value_length_swa"}) {
    if (!keys.has(key)) keys.invalid("missing key " + keys.key(key));
  }
  // attention.causal false makes llama.cpp's sliding-window layers
  // bidirectional (non_causal_type SWA_ONLY), which Cortiq does not run.
  if (!keys.bool_or("attention.causal", true)) {
    keys.invalid(
        "gemma4 with attention.causal = false (bidirectional sliding-window layers) is "
        "not supported");
  }
  hp.embedding_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.attention_scale = 1.0f;
  hp.final_softcap = keys.float_or("final_logit_softcapping", 0.0f);
  hp.sliding_window = keys.uint_or("attention.sliding_window", 0);
  hp.per_layer_embd = keys.uint_or("embedding_length_per_layer_input", 0);
  const int64_t head_swa = keys.uint_or("attention.key_length_swa", 0);
  if (hp.head_dim_k != hp.head_dim_v || head_swa != keys.uint_or("attention.value_length_swa", 0) ||
      head_swa <= 0) {
    keys.invalid("gemma4 needs key_length = value_length and key_length_swa = value_length_swa");
  }
  // Local layers: their own base and rotated dimensions, no position
  // scaling (llama.cpp's rope_freq_*_train_swa).
  hp.rope_local.freq_base = keys.float_or("rope.freq_base_swa", 10000.0f);
  hp.rope_local.freq_scale = 1.0f;
  hp.rope_local.n_dims = keys.uint_or("rope.dimension_count_swa", hp.rope.n_dims);
  const std::vector<bool> local = sliding_window_layers(keys, hp.n_layer);
  for (size_t il = 0; il < hp.layers.size(); ++il) {
    if (!local[il]) continue;
    LayerSpec& layer = hp.layers[il];
    layer.window = hp.sliding_window;
    layer.rope = RopeSlot::local;
    layer.head_dim_k = layer.head_dim_v = head_swa;
  }
  if (std::find(local.begin(), local.end(), true) != local.end()) {
    if (hp.sliding_window <= 0) keys.invalid("attention.sliding_window must be positive");
    const int64_t dims = hp.rope_local.n_dims;
    if (dims <= 0 || dims % 2 != 0 || dims > head_swa) {
      keys.invalid("rope.dimension_count_swa must be even and within key_length_swa");
    }
  }
  const int64_t shared = keys.uint_or("attention.shared_kv_layers", 0);
  const int64_t kv_layers = hp.n_layer - shared;
  // llama.cpp's cache asserts at least two layers with keys of their own.
  if (kv_layers < 2) {
    keys.invalid("gemma4 needs at least two layers with their own keys (shared_kv_layers " +
                 std::to_string(shared) + " of " + std::to_string(hp.n_layer) + ")");
  }
  for (int64_t il = kv_layers; il < hp.n_layer; ++il) {
    const LayerSpec& source = hp.layer(kv_source_of(hp, il, kv_layers));
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    if (source.window != layer.window || source.head_dim_k != layer.head_dim_k ||
        source.n_head != layer.n_head || source.n_head_kv != layer.n_head_kv) {
      keys.invalid("KV-shared layer " + std::to_string(il) +
                   " differs in kind or shape from the layer whose cache it reads");
    }
    layer.n_head_kv = 0;  // the cache keeps nothing for it
  }
}

// A key of the common metadata set to `value` (replaced, or added).
void set_key(std::vector<gguf::KeyValue>& keys, const std::string& key, gguf::Value value) {
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  keys.push_back({key, std::move(value)});
}

// As Gemma 4 E2B's converter writes it, scaled down: global layers twice the
// head size of the local ones, local and global layers in turn, and from four
// layers on the last two sharing the keys of the two before them.
void write_gemma4(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "gemma4.";
  const int64_t head = g.resolved_head_dim();
  set_key(keys, p + "attention.key_length", u32_value(2 * head));
  set_key(keys, p + "attention.value_length", u32_value(2 * head));
  set_key(keys, p + "rope.dimension_count", u32_value(2 * head));
  keys.push_back({p + "attention.key_length_swa", u32_value(head)});
  keys.push_back({p + "attention.value_length_swa", u32_value(head)});
  keys.push_back({p + "rope.dimension_count_swa", u32_value(head)});
  keys.push_back({p + "rope.freq_base_swa", gguf::Value(5000.0f)});
  keys.push_back({p + "attention.sliding_window", u32_value(g.resolved_sliding_window())});
  gguf::Array pattern = gguf::Array::of(gguf::ValueType::boolean);
  auto& flags = std::get<std::vector<bool>>(pattern.items);
  for (int64_t il = 0; il < g.n_layer; ++il) flags.push_back(il % 2 == 0);
  keys.push_back({p + "attention.sliding_window_pattern", gguf::Value(pattern)});
  const int64_t shared = g.n_layer >= 4 && g.n_layer % 2 == 0 ? 2 : 0;
  keys.push_back({p + "attention.shared_kv_layers", u32_value(shared)});
  keys.push_back({p + "embedding_length_per_layer_input", u32_value(g.n_embd / 4)});
  keys.push_back({p + "final_logit_softcapping", gguf::Value(30.0f)});
}

// Gemma 4's converted checkpoints carry each layer's output scale; attn_v is
// absent from the full layers of the larger models (K serves as V), which the
// goldens without --all-tensors exercise.
constexpr std::string_view kGemma4Converted[] = {"layer_output_scale.weight"};

}  // namespace

const Family kGemma4Family{.arch = "gemma4",
                           .neox_rope = true,
                           .make = make_model<Gemma4Model>,
                           .read_hparams = read_gemma4,
                           .tensors = tensors_of<Gemma4Weights>,
                           .write_hparams = write_gemma4,
                           .converted_optional = kGemma4Converted};

}  // namespace cortiq
