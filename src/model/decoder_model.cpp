#include "model/decoder_model.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kv/kv_cache.hpp"
#include "model/family.hpp"
#include "model/weights.hpp"

namespace cortiq {

void throw_host_only(std::string_view block, std::string_view backend) {
  throw Error("the " + std::string(backend) + " backend has no ops for " + std::string(block) +
              " yet (host code only)");
}

namespace {

// ARCH.vocab_size and the tokenizer's list are both optional: the token
// embedding's row count decides then.
void resolve_vocab_size(const gguf::GgufFile& file, ModelHParams& hp) {
  if (hp.n_vocab == 0) {
    const auto* embd = file.find_tensor("token_embd.weight");
    if (embd && embd->shape.size() == 2) hp.n_vocab = embd->shape[1];
  }
  if (hp.n_vocab <= 0) throw Error(file.path() + ": cannot tell the vocabulary size");
}

// The rows of each sequence must continue it: positions length, length+1, ...
void check_rows(std::span<const BatchRow> rows, const KvCache& cache, int64_t n_vocab,
                int64_t row_width, int64_t n_logits_capacity, std::vector<int64_t>& next) {
  if (rows.empty()) throw Error("forward: empty batch");
  const int32_t n_seq = cache.shape().n_seq;
  next.assign(static_cast<size_t>(n_seq), -1);
  int64_t n_logits = 0;
  for (const auto& row : rows) {
    if (row.seq < 0 || row.seq >= n_seq) {
      throw Error(strfmt("forward: sequence %d out of range (%d sequences)", row.seq, n_seq));
    }
    if (row.token < 0 || row.token >= n_vocab) {
      throw Error(strfmt("token id %d is outside the vocabulary (0..%lld)", row.token,
                         static_cast<long long>(n_vocab - 1)));
    }
    auto& expected = next[static_cast<size_t>(row.seq)];
    if (expected < 0) expected = cache.length(row.seq);
    if (row.pos != expected) {
      throw Error(strfmt("forward: sequence %d continues at position %lld, not %d", row.seq,
                         static_cast<long long>(expected), row.pos));
    }
    ++expected;
    n_logits += row.logits ? 1 : 0;
  }
  if (n_logits * row_width > n_logits_capacity) throw Error("forward: output buffer too small");
}

// Completes the pass's stage from the model (its layer count and the width
// of a row between stages) and checks it: a range of the layers, an input
// of one row per batch row (required past the first layer) and room for
// the rows it hands on.
void resolve_stage(const ModelHParams& hp, int64_t width, size_t n_rows, size_t out_capacity,
                   LayerStage& stage) {
  stage.n_layer = hp.n_layer;
  stage.width = width;
  if (stage.last < 0) stage.last = hp.n_layer;
  if (stage.first < 0 || stage.first >= stage.last || stage.last > hp.n_layer) {
    throw Error(strfmt("forward: layers [%lld, %lld) are not a range of the model's %lld",
                       static_cast<long long>(stage.first), static_cast<long long>(stage.last),
                       static_cast<long long>(hp.n_layer)));
  }
  const size_t stage_floats = n_rows * static_cast<size_t>(width);
  if (stage.from_tokens() && stage.first > 0) {
    throw Error(
        strfmt("forward: a stage starting at layer %lld needs the hidden states entering it",
               static_cast<long long>(stage.first)));
  }
  if (!stage.from_tokens() && stage.input.size() != stage_floats) {
    throw Error(strfmt("forward: the stage's input has %zu floats, not %zu (%zu rows of %lld)",
                       stage.input.size(), stage_floats, n_rows, static_cast<long long>(width)));
  }
  if (!stage.ends_in_head() && out_capacity < stage_floats) {
    throw Error(strfmt("forward: the stage's output needs %zu floats, the buffer has %zu",
                       stage_floats, out_capacity));
  }
}

// An encoder gives hidden states only, and (attending both ways) sees each
// sequence whole in one pass: a sequence must start empty.
void check_encoder_rows(const ModelHParams& hp, std::span<const BatchRow> rows,
                        const KvCache& cache, RowOutput output) {
  if (output != RowOutput::hidden) {
    throw Error(hp.arch +
                " is a text encoder (embeddings): it has no output layer to give "
                "logits, so it cannot generate or score text; use `cortiq embed` or the "
                "server's /v1/embeddings");
  }
  if (hp.causal_attention) return;
  for (const auto& row : rows) {
    if (cache.length(row.seq) != 0) {
      throw Error(hp.arch +
                  " attends in both directions: a sequence must come whole in one "
                  "forward pass, not continue a cached one");
    }
  }
}

}  // namespace

void DecoderModel::forward(std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                           std::span<float> logits) const {
  resolve_stage(hparams_, stage_width(), rows.size(), logits.size(), ctx.stage);
  check_stage_kv_sources(ctx.stage);
  if (ctx.split.backend != nullptr &&
      (ctx.split.layer < ctx.stage.first || ctx.split.layer >= ctx.stage.last)) {
    throw Error(strfmt("forward: a split at layer %lld is outside the stage's layers [%lld, %lld)",
                       static_cast<long long>(ctx.split.layer),
                       static_cast<long long>(ctx.stage.first),
                       static_cast<long long>(ctx.stage.last)));
  }
  if (ctx.split.backend != nullptr) {
    // Each backend's layers read the rows its own storage keeps.
    LayerStage before = ctx.stage, after = ctx.stage;
    before.last = after.first = ctx.split.layer;
    if (before.first < before.last) check_stage_kv_sources(before);
    check_stage_kv_sources(after);
  }
  // A stage that hands its rows on writes no logits.
  const int64_t row_width = !ctx.stage.ends_in_head()         ? 0
                            : ctx.output == RowOutput::hidden ? hparams_.n_embd
                                                              : hparams_.n_vocab;
  check_rows(rows, cache, hparams_.n_vocab, row_width, static_cast<int64_t>(logits.size()),
             ctx.buffers.seq_next);
  if (hparams_.encoder) check_encoder_rows(hparams_, rows, cache, ctx.output);
  auto& cells = ctx.buffers.row_cells;
  cells.resize(rows.size());
  bool layers_ran = false;
  try {
    for (size_t i = 0; i < rows.size(); ++i) {
      cells[i] = cache.append(rows[i].seq, {&rows[i].token, 1})[0];
    }
    layers_ran = true;
    run_split_layers(rows, cells, cache, ctx, logits);
    if (ctx.prompt_rows) fault::hit(fault::Site::prefill);
    if (ctx.generated_rows) fault::hit(fault::Site::decode);
    // Only now are the rows' keys and values written: the batch's full
    // blocks may enter the prefix cache. seq_next marks the batch's sequences.
    const auto& batch_next = ctx.buffers.seq_next;
    for (size_t seq = 0; seq < batch_next.size(); ++seq) {
      if (batch_next[seq] >= 0) cache.commit(static_cast<int32_t>(seq));
    }
  } catch (...) {
    // Each sequence goes back to its first position in the batch (truncating
    // to a later row's position first is a no-op or a partial cut). A
    // recurrent state the layers advanced part way cannot go back (keeping
    // a copy of every state for that would cost a copy per pass): such a
    // sequence starts over, empty, rather than half-advanced.
    for (const auto& row : rows) {
      if (!cache.has_state()) {
        cache.truncate(row.seq, row.pos);
      } else if (layers_ran) {
        cache.clear(row.seq);
      } else {
        cache.drop_appended(row.seq, row.pos);
      }
    }
    throw;
  }
}

void DecoderModel::run_split_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells,
                                    KvCache& cache, ForwardContext& ctx,
                                    std::span<float> logits) const {
  if (ctx.split.backend == nullptr) return run_layers(rows, cells, cache, ctx, logits);
  ForwardContext second = ctx.on(*ctx.split.backend);
  second.stage.first = ctx.split.layer;
  if (ctx.split.layer > ctx.stage.first) {
    ForwardContext first = ctx.on(ctx.backend);
    first.stage.last = ctx.split.layer;
    first.all_hidden = {};
    const auto handed = ForwardBuffers::take(ctx.buffers.stage_rows,
                                             rows.size() * static_cast<size_t>(ctx.stage.width));
    run_layers(rows, cells, cache, first, handed);
    second.stage.input = handed;
  }
  run_layers(rows, cells, cache, second, logits);
}

void DecoderModel::check_stage_kv_sources(const LayerStage& stage) const {
  for (const int64_t il : stage.layers()) {
    const int64_t source = kv_source_layer(il);
    if (source < stage.first || source >= stage.last) {
      throw Error(
          strfmt("forward: layer %lld attends over the keys and values of layer %lld, "
                 "outside the stage's layers [%lld, %lld)",
                 static_cast<long long>(il), static_cast<long long>(source),
                 static_cast<long long>(stage.first), static_cast<long long>(stage.last)));
    }
  }
}

void DecoderModel::forward_mtp(std::span<const BatchRow> rows, std::span<const float> h_in,
                               KvCache& cache, ForwardContext& ctx, std::span<float> h_out,
                               std::span<float> logits) const {
  if (!has_mtp()) throw Error(hparams_.arch + ": this model runs no multi-token-prediction layer");
  const auto n_embd = static_cast<size_t>(hparams_.n_embd);
  if (h_in.size() != rows.size() * n_embd || h_out.size() != rows.size() * n_embd) {
    throw Error(strfmt("MTP forward: %zu rows need %zu hidden floats, got %zu in and %zu out",
                       rows.size(), rows.size() * n_embd, h_in.size(), h_out.size()));
  }
  check_rows(rows, cache, hparams_.n_vocab, hparams_.n_vocab, static_cast<int64_t>(logits.size()),
             ctx.buffers.seq_next);
  auto& cells = ctx.buffers.row_cells;
  cells.resize(rows.size());
  try {
    for (size_t i = 0; i < rows.size(); ++i) {
      cells[i] = cache.append(rows[i].seq, {&rows[i].token, 1})[0];
    }
    run_mtp(rows, cells, h_in, cache, ctx, h_out, logits);
  } catch (...) {
    for (const auto& row : rows) cache.truncate(row.seq, row.pos);
    throw;
  }
}

void DecoderModel::run_mtp(std::span<const BatchRow> /*rows*/, std::span<const int32_t> /*cells*/,
                           std::span<const float> /*h_in*/, KvCache& /*cache*/,
                           ForwardContext& /*ctx*/, std::span<float> /*h_out*/,
                           std::span<float> /*logits*/) const {
  throw Error(hparams_.arch + ": this model runs no multi-token-prediction layer");
}

KvCacheShape DecoderModel::mtp_cache_shape(int64_t n_cells, KvType type) const {
  KvCacheShape shape = kv_cache_shape_of(hparams_.with_mtp_layers(), n_cells, 1, type);
  // The trunk's layers keep nothing here.
  for (size_t il = 0; il < static_cast<size_t>(hparams_.n_layer); ++il) shape.layers[il] = {};
  return shape;
}

DecoderModel::DecoderModel(ModelHParams hparams, WeightBinder& binder)
    : hparams_(std::move(hparams)) {
  binder.pack_into(&packed_weights_);
}

KvCacheShape kv_cache_shape_of(const ModelHParams& hp, int64_t n_cells, int32_t n_seq, KvType type,
                               int32_t block_size) {
  KvCacheShape shape;
  for (const LayerSpec& layer : hp.layers) {
    shape.layers.push_back({layer.k_width(), layer.values_in_keys ? 0 : layer.v_width(),
                            layer.window, layer.values_in_keys, layer.state_width});
  }
  shape.n_cells = n_cells;
  shape.n_seq = n_seq;
  // llama.cpp's encoders keep no cache: their keys and values stay f32.
  shape.type = hp.encoder ? KvType::f32 : type;
  shape.block_size = block_size;
  return shape;
}

KvCacheShape DecoderModel::kv_cache_shape(int64_t n_cells, int32_t n_seq, KvType type,
                                          int32_t block_size) const {
  return kv_cache_shape_of(hparams_, n_cells, n_seq, type, block_size);
}

std::unique_ptr<DecoderModel> load_decoder_model(const gguf::GgufFile& file) {
  return load_decoder_model(file, read_decoder_hparams(file));
}

ModelHParams read_decoder_hparams(const gguf::GgufFile& file) {
  ModelHParams hp = ModelHParams::from_gguf(file, family_of(file));
  resolve_vocab_size(file, hp);
  return hp;
}

std::unique_ptr<DecoderModel> load_decoder_model(const gguf::GgufFile& file, ModelHParams hp) {
  const Family& family = family_of(file);
  WeightBinder binder(file);
  auto model = family.make(std::move(hp), binder);
  binder.check_all_used(family.arch);
  return model;
}

}  // namespace cortiq
