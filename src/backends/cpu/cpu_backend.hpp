// The CPU backend: the op layer (backends/backend.hpp) carried out by the
// kernels of kernels/cpu on host tensors, threaded over a ThreadPool. Every
// op is the kernel the blocks called before the op layer existed, with the
// same arguments in the same order, so the bits are the kernels' bits.
//
// It is light: a forward pass makes one over its caller's thread pool and
// CpuScratch (kept by the pass, so that decoding allocates nothing once
// warm). It takes only host tensors.
#pragma once

#include <vector>

#include "backends/backend.hpp"
#include "kernels/cpu/matmul.hpp"

namespace cortiq {

// The CPU backend's working memory, owned by whoever keeps a pass's buffers.
struct CpuScratch {
  std::vector<kernels::MatmulOutput> products;  // the products as the kernels take them
  std::vector<std::span<const float>> inputs;   // matmul_each_input's inputs as spans
  std::vector<std::vector<float>> scores;       // per thread: attention's scores of a tile
  kernels::MatmulScratch matmul;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(ThreadPool& pool, CpuScratch& scratch) : pool_(pool), scratch_(scratch) {}

  std::string_view name() const override { return "cpu"; }
  ThreadPool& host_pool() const override { return pool_; }
  bool computes_on_host() const override { return true; }

  Tensor scratch(std::vector<float>& slot, size_t n) override;
  void copy_from_host(std::span<const float> src, Tensor dst) override;
  void copy_to_host(ConstTensor src, std::span<float> dst) override;
  void copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride, size_t width,
                 size_t n_rows) override;
  void gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                   size_t width) override;
  void scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                    size_t width) override;
  Tensor output_tensor(std::span<float> host, std::vector<float>& slot) override;

  void matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
              int64_t y_stride) override;
  void matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                           int64_t n_rows) override;
  void matmul_each_input(std::span<const MatmulProduct> products,
                         std::span<const ConstTensor> inputs) override;
  void get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                Tensor out) override;

  void rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps, Tensor out,
                     size_t width) override;
  void layer_norm_rows(ConstTensor x, std::span<const float> weight, std::span<const float> bias,
                       float eps, Tensor out, size_t width) override;

  void add(Tensor x, ConstTensor b) override;
  void add_bias_rows(Tensor rows, std::span<const float> bias) override;
  void divide_rows(Tensor rows, std::span<const float> divisor) override;
  void scale(Tensor x, float s) override;
  void scale_rows(Tensor x, ConstTensor factors, size_t width) override;
  void sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) override;
  void clamp(Tensor x, float lo, float hi) override;
  void softcap(Tensor x, float cap) override;
  void unary(UnaryOp op, Tensor x) override;
  void xielu(Tensor x, const kernels::XieluParams& params) override;
  void glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) override;
  void glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) override;

  void rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                 const kernels::RopeParams& params, std::span<const float> table) override;

  void store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells, ConstTensor k,
                ConstTensor v, size_t k_width, size_t v_width) override;
  void attention(const AttentionOp& op, const KvCache& cache, ConstTensor q, Tensor out) override;

 private:
  // The products as the kernels take them, in a buffer the pass reuses.
  std::span<const kernels::MatmulOutput> kernel_products(std::span<const MatmulProduct> products);

  ThreadPool& pool_;
  CpuScratch& scratch_;
};

}  // namespace cortiq
