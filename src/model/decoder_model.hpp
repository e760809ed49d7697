// A decoder-only language model bound to its weights: the interface every
// architecture family implements and the runtime drives.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "kernels/cpu/packed_weights.hpp"
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

class KvCache;
struct KvCacheShape;
enum class KvType;
class WeightBinder;
struct ClassifierHead;

class DecoderModel {
 public:
  virtual ~DecoderModel() = default;

  const ModelHParams& hparams() const { return hparams_; }
  const kernels::PackedWeightStore& packed_weights() const { return packed_weights_; }

  // The model's sequence classification head (rank pooling), or nullptr.
  virtual const ClassifierHead* classifier() const { return nullptr; }

  // The KV cache this model needs for n_cells positions over n_seq
  // sequences: one row of keys and one of values per layer and position,
  // each layer's widths and window its own. Callers never build the shape
  // themselves; they set its n_ubatch (their prefill chunk) to bound the
  // sliding-window layers' rows by the window.
  KvCacheShape kv_cache_shape(int64_t n_cells, int32_t n_seq, KvType type,
                              int32_t block_size = 16) const;

  // Runs the rows through the model. Their keys and values enter the cache
  // (the rows of each sequence must continue it: consecutive positions from
  // its current length); the logits of the rows marked `logits` are written
  // in row order to `logits` ([n marked][n_vocab]; with ctx.output hidden,
  // their final-normed hidden states, [n marked][n_embd]). Each row's result is
  // bitwise independent of the other rows in the batch. On an exception the
  // rows' cells are released again.
  //
  // ctx.stage picks the layers the pass runs (model/layer_stage.hpp): a
  // stage that starts past the first layer reads the rows' hidden states,
  // and one that ends before the last writes every row's hidden state,
  // [rows][stage_width()], to `logits` instead. Its cache keeps the keys and
  // values of its own layers.
  void forward(std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
               std::span<float> logits) const;

  // The floats one row carries from a stage to the next: n_embd, the
  // residual stream, unless the family carries more between layers.
  virtual int64_t stage_width() const { return hparams_.n_embd; }
  // The layer whose keys and values layer il attends over: il itself, or
  // an earlier layer for a family whose layers share a cache (Gemma 4). A
  // stage must hold the layers its layers read (forward refuses it else).
  virtual int64_t kv_source_layer(int64_t il) const { return il; }

  // Multi-token prediction (the file's first nextn layer), for speculative
  // drafting (MtpDrafter): whether the family runs it.
  virtual bool has_mtp() const { return false; }
  // The KV cache forward_mtp writes: the MTP layer's rows only (the trunk's
  // layers take no memory in it).
  KvCacheShape mtp_cache_shape(int64_t n_cells, KvType type) const;
  // Runs the MTP layer over rows x_p at position p of one sequence, each
  // paired with the trunk's final-normed hidden state at p - 1 (`h_in`,
  // [rows][n_embd]; zeros at p = 0): their keys and values enter `cache`
  // (mtp_cache_shape), `h_out` ([rows][n_embd]) gets the layer's normed
  // output (the h of the next drafting step) and the rows marked `logits`
  // write theirs to `logits`, in order. Rolls the rows back on an
  // exception, as forward() does.
  void forward_mtp(std::span<const BatchRow> rows, std::span<const float> h_in, KvCache& cache,
                   ForwardContext& ctx, std::span<float> h_out, std::span<float> logits) const;

 protected:
  // Matrices the binder packs from now on go to this model's store.
  DecoderModel(ModelHParams hparams, WeightBinder& binder);

  // The family's layers over rows whose cells are already appended; `cells`
  // gives each row's cell.
  virtual void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells,
                          KvCache& cache, ForwardContext& ctx, std::span<float> logits) const = 0;
  // Refuses a stage with a layer whose cache source lies outside it.
  void check_stage_kv_sources(const LayerStage& stage) const;
  // run_layers over ctx's stage, in two parts on two backends when ctx has
  // a split.
  void run_split_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells,
                        KvCache& cache, ForwardContext& ctx, std::span<float> logits) const;
  // forward_mtp's work, for a family whose has_mtp() is true.
  virtual void run_mtp(std::span<const BatchRow> rows, std::span<const int32_t> cells,
                       std::span<const float> h_in, KvCache& cache, ForwardContext& ctx,
                       std::span<float> h_out, std::span<float> logits) const;

  ModelHParams hparams_;
  // Packed copies of the matrices the integer kernels read interleaved; the
  // family's WeightBinder fills it.
  kernels::PackedWeightStore packed_weights_;
};

// The KV cache shape of a model with these hyper-parameters
// (DecoderModel::kv_cache_shape), for reports that do not load the weights.
KvCacheShape kv_cache_shape_of(const ModelHParams& hp, int64_t n_cells, int32_t n_seq, KvType type,
                               int32_t block_size = 16);

// Binds the weights of a parsed GGUF to the family of its
// general.architecture. The file must outlive the model (weights are views
// into its mapping). Throws cortiq::Error for an unknown architecture, a
// missing / misshapen tensor, or a tensor the family does not use.
std::unique_ptr<DecoderModel> load_decoder_model(const gguf::GgufFile& file);
// The same in two steps, for a caller that sets what the file does not say
// (ModelHParams::n_ctx_seq): the hyper-parameters of the file's family, then
// the model bound with them.
ModelHParams read_decoder_hparams(const gguf::GgufFile& file);
std::unique_ptr<DecoderModel> load_decoder_model(const gguf::GgufFile& file, ModelHParams hparams);

}  // namespace cortiq
