// One description of a family's tensors serves both directions: each block
// lists its tensors once, in a visit(TensorVisitor&, ...) function, and the
// loader (WeightBinder: bind and check each one) and gen-model
// (TensorSpecCollector: write each one) are two visitors of that list.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/weight_view.hpp"

namespace cortiq {

enum class TensorKind {
  matrix,  // a weight matrix: random normal, quantized to the model's type
  norm,    // a norm weight: near 1, kept F32
  bias,    // a bias vector: small, kept F32
  scale,   // a one-element multiplier of a matrix product (NAME.scale): near 1, F32
  router,  // a mixture-of-experts router matrix (ffn_gate_inp): random normal, kept F32
           // (llama.cpp's converter and llama-quantize never quantize it)
  conv,    // a convolution kernel (LFM2's shortconv.conv): random normal, kept F32 (its
           // rows, one kernel per channel, are a few values wide)
  decay,   // a state space layer's A (ssm_a): -exp(normal), negative as converters store
           // it (A = -exp(A_log)), so a random model's state decays; F32
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  TensorKind kind = TensorKind::matrix;
  bool required = true;
};

class TensorVisitor {
 public:
  virtual ~TensorVisitor() = default;
  // A matrix of n_rows rows of n_cols elements (ggml shape {n_cols, n_rows});
  // an optional one that is absent leaves `view` empty.
  virtual void matrix(kernels::WeightView& view, const std::string& name, int64_t n_cols,
                      int64_t n_rows, bool required = true) = 0;
  // A matrix that files keep in F32 whatever the weight type (a MoE
  // router, TensorKind::router); bound like matrix().
  virtual void router(kernels::WeightView& view, const std::string& name, int64_t n_cols,
                      int64_t n_rows, bool required = true) = 0;
  // A mixture-of-experts layer's stack of n_expert matrices of n_rows rows
  // of n_cols elements (ggml shape {n_cols, n_rows, n_expert}: ffn_*_exps),
  // one view per expert; an optional one that is absent leaves `views` empty.
  // With n_parts > 1, each expert's rows are cut in that many equal parts,
  // a view each: views[e * n_parts + p] (a fused ffn_gate_up_exps).
  virtual void experts(std::vector<kernels::WeightView>& views, const std::string& name,
                       int64_t n_cols, int64_t n_rows, int64_t n_expert, bool required = true,
                       int64_t n_parts = 1) = 0;
  // A vector of n values as f32; an optional one that is absent leaves it empty.
  virtual void vector(std::vector<float>& values, const std::string& name, int64_t n,
                      TensorKind kind, bool required = true) = 0;
  // A small table of n_rows rows of n_cols values (ggml shape {n_cols,
  // n_rows}) read as f32, row after row, like a vector (StableLM's per-head
  // Q/K norm weights, [head_dim, n_head]); an optional one that is absent
  // leaves it empty.
  virtual void table(std::vector<float>& values, const std::string& name, int64_t n_cols,
                     int64_t n_rows, TensorKind kind, bool required = true) = 0;
  // A small tensor of ggml shape `shape` read as f32 in memory order, for
  // the converters that write dimensions of one between the real ones
  // (Kimi Linear's convolutions [taps, 1, channels, 1]): the file may have
  // more or fewer dimensions of one anywhere, the same values in the same
  // order; gen-model writes `shape`. An optional one that is absent leaves
  // it empty.
  virtual void shaped(std::vector<float>& values, const std::string& name,
                      const std::vector<int64_t>& shape, TensorKind kind, bool required = true) = 0;
  // An optional one-element scale; `value` stays 1 when absent.
  virtual void scale(float& value, const std::string& name) = 0;

  // An optional tensor of n values that llama.cpp reads but applies nowhere
  // in this family's graph: NAME.input_scale (activation scales of NVFP4
  // checkpoints), the FFN scales of the families whose graph passes none
  // (Qwen2, Gemma), OLMo 2's Q/K/V biases. Matching llama.cpp, it changes
  // nothing; the loader says so once (WeightBinder::check_all_used) instead
  // of ignoring it in silence.
  virtual void without_effect(const std::string& name, int64_t n, TensorKind kind) = 0;
  void scale_without_effect(const std::string& name) { without_effect(name, 1, TensorKind::scale); }

  // Whether the file has the tensor, for the choices llama.cpp makes on
  // presence (attn_qkv.weight instead of attn_{q,k,v}.weight). The loader
  // answers from the file; gen-model answers `written`, what the family's
  // converter writes.
  virtual bool has(const std::string& name, bool written) = 0;
  // The file's row count of a matrix (ggml shape[1]), for the choices
  // llama.cpp makes on a tensor's shape (Laguna's attention gate: one value
  // per head or per element); 0 when absent. gen-model answers `written`.
  virtual int64_t rows_of(const std::string& name, int64_t written) = 0;
};

// Collects the visited tensors as specs (shapes only; nothing is bound).
class TensorSpecCollector final : public TensorVisitor {
 public:
  void matrix(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override;
  void router(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override;
  void experts(std::vector<kernels::WeightView>& views, const std::string& name, int64_t n_cols,
               int64_t n_rows, int64_t n_expert, bool required, int64_t n_parts) override;
  void vector(std::vector<float>& values, const std::string& name, int64_t n, TensorKind kind,
              bool required) override;
  void table(std::vector<float>& values, const std::string& name, int64_t n_cols, int64_t n_rows,
             TensorKind kind, bool required) override;
  void shaped(std::vector<float>& values, const std::string& name,
              const std::vector<int64_t>& shape, TensorKind kind, bool required) override;
  void scale(float& value, const std::string& name) override;
  void without_effect(const std::string& name, int64_t n, TensorKind kind) override;
  bool has(const std::string& name, bool written) override;
  int64_t rows_of(const std::string& name, int64_t written) override;

  std::vector<TensorSpec> take() { return std::move(specs_); }

 private:
  std::vector<TensorSpec> specs_;
};

// Forwards every tensor to another visitor but the one-element scales
// (NAME.scale, NAME.input_scale), which it leaves out: llama.cpp reads none
// for the layers it loads only to skip (multi-token-prediction layers), so
// a file with them there is refused as with an unknown tensor.
class ScalelessVisitor final : public TensorVisitor {
 public:
  explicit ScalelessVisitor(TensorVisitor& inner) : inner_(inner) {}
  void matrix(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override {
    inner_.matrix(view, name, n_cols, n_rows, required);
  }
  void router(kernels::WeightView& view, const std::string& name, int64_t n_cols, int64_t n_rows,
              bool required) override {
    inner_.router(view, name, n_cols, n_rows, required);
  }
  void experts(std::vector<kernels::WeightView>& views, const std::string& name, int64_t n_cols,
               int64_t n_rows, int64_t n_expert, bool required, int64_t n_parts) override {
    inner_.experts(views, name, n_cols, n_rows, n_expert, required, n_parts);
  }
  void vector(std::vector<float>& values, const std::string& name, int64_t n, TensorKind kind,
              bool required) override {
    if (kind != TensorKind::scale) inner_.vector(values, name, n, kind, required);
  }
  void table(std::vector<float>& values, const std::string& name, int64_t n_cols, int64_t n_rows,
             TensorKind kind, bool required) override {
    inner_.table(values, name, n_cols, n_rows, kind, required);
  }
  void shaped(std::vector<float>& values, const std::string& name,
              const std::vector<int64_t>& shape, TensorKind kind, bool required) override {
    inner_.shaped(values, name, shape, kind, required);
  }
  void scale(float&, const std::string&) override {}
  void without_effect(const std::string& name, int64_t n, TensorKind kind) override {
    if (kind != TensorKind::scale) inner_.without_effect(name, n, kind);
  }
  bool has(const std::string& name, bool written) override { return inner_.has(name, written); }
  int64_t rows_of(const std::string& name, int64_t written) override {
    return inner_.rows_of(name, written);
  }

 private:
  TensorVisitor& inner_;
};

// "blk.N.what"
std::string layer_tensor_name(int64_t layer, std::string_view what);
// "blk.N.attn_q.scale" for "blk.N.attn_q.weight": the scale of a matrix.
std::string scale_name_of(std::string_view weight_name);

}  // namespace cortiq
