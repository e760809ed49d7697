// A backend for tests that counts every op before handing it to the CPU
// backend, and can fail one op on purpose (as a device would that lost
// itself mid-pass): what shows which ops a pass asks of the machine, and
// that a failure partway through leaves the cache as it was.
#pragma once

#include <array>
#include <string>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"

namespace cortiq::test {

enum class Op : uint8_t {
  matmul,
  matmul_shared_input,
  matmul_each_input,
  get_rows,
  rms_norm_rows,
  layer_norm_rows,
  add,
  add_bias_rows,
  scale,
  clamp,
  softcap,
  unary,
  glu,
  glu_halves,
  rope_rows,
  store_kv,
  attention,
  copy_from_host,
  copy_to_host,
  copy_rows,
  gather_rows,
  scatter_rows,
  scale_rows,
  sum_row_groups,
  divide_rows,
  xielu,
  count
};

// Counts each op, then runs it on the CPU backend; with fail_at >= 0, the
// op with that index (0: the pass's first) throws instead, as a device
// would that lost itself mid-pass.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(CpuBackend& cpu, int fail_at = -1) : cpu_(cpu), fail_at_(fail_at) {}

  int count(Op op) const { return counts_[static_cast<size_t>(op)]; }
  int total() const { return total_; }

  std::string_view name() const override { return "counting"; }
  ThreadPool& host_pool() const override { return cpu_.host_pool(); }
  bool computes_on_host() const override { return true; }

  Tensor scratch(std::vector<float>& slot, size_t n) override { return cpu_.scratch(slot, n); }
  Tensor output_tensor(std::span<float> host, std::vector<float>& slot) override {
    return cpu_.output_tensor(host, slot);
  }
  void copy_from_host(std::span<const float> src, Tensor dst) override {
    arrive(Op::copy_from_host);
    cpu_.copy_from_host(src, dst);
  }
  void copy_to_host(ConstTensor src, std::span<float> dst) override {
    arrive(Op::copy_to_host);
    cpu_.copy_to_host(src, dst);
  }

  void copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride, size_t width,
                 size_t n_rows) override {
    arrive(Op::copy_rows);
    cpu_.copy_rows(src, src_stride, dst, dst_stride, width, n_rows);
  }

  void gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                   size_t width) override {
    arrive(Op::gather_rows);
    cpu_.gather_rows(src, rows, dst, width);
  }
  void scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                    size_t width) override {
    arrive(Op::scatter_rows);
    cpu_.scatter_rows(src, dst, rows, width);
  }
  void scale_rows(Tensor x, ConstTensor factors, size_t width) override {
    arrive(Op::scale_rows);
    cpu_.scale_rows(x, factors, width);
  }
  void sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) override {
    arrive(Op::sum_row_groups);
    cpu_.sum_row_groups(x, group, out, width);
  }
  void divide_rows(Tensor rows, std::span<const float> divisor) override {
    arrive(Op::divide_rows);
    cpu_.divide_rows(rows, divisor);
  }
  void xielu(Tensor x, const kernels::XieluParams& params) override {
    arrive(Op::xielu);
    cpu_.xielu(x, params);
  }

  void matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
              int64_t y_stride) override {
    arrive(Op::matmul);
    cpu_.matmul(w, x, n_rows, y, y_stride);
  }
  void matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                           int64_t n_rows) override {
    arrive(Op::matmul_shared_input);
    cpu_.matmul_shared_input(products, x, n_rows);
  }
  void matmul_each_input(std::span<const MatmulProduct> products,
                         std::span<const ConstTensor> inputs) override {
    arrive(Op::matmul_each_input);
    cpu_.matmul_each_input(products, inputs);
  }
  void get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                Tensor out) override {
    arrive(Op::get_rows);
    cpu_.get_rows(table, ids, out);
  }
  void rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps, Tensor out,
                     size_t width) override {
    arrive(Op::rms_norm_rows);
    cpu_.rms_norm_rows(x, weight, eps, out, width);
  }
  void layer_norm_rows(ConstTensor x, std::span<const float> weight, std::span<const float> bias,
                       float eps, Tensor out, size_t width) override {
    arrive(Op::layer_norm_rows);
    cpu_.layer_norm_rows(x, weight, bias, eps, out, width);
  }
  void add(Tensor x, ConstTensor b) override {
    arrive(Op::add);
    cpu_.add(x, b);
  }
  void add_bias_rows(Tensor rows, std::span<const float> bias) override {
    arrive(Op::add_bias_rows);
    cpu_.add_bias_rows(rows, bias);
  }
  void scale(Tensor x, float s) override {
    arrive(Op::scale);
    cpu_.scale(x, s);
  }
  void clamp(Tensor x, float lo, float hi) override {
    arrive(Op::clamp);
    cpu_.clamp(x, lo, hi);
  }
  void softcap(Tensor x, float cap) override {
    arrive(Op::softcap);
    cpu_.softcap(x, cap);
  }
  void unary(UnaryOp op, Tensor x) override {
    arrive(Op::unary);
    cpu_.unary(op, x);
  }
  void glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) override {
    arrive(Op::glu);
    cpu_.glu(op, gate, up, out);
  }
  void glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) override {
    arrive(Op::glu_halves);
    cpu_.glu_halves(op, both, out, width);
  }
  void rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                 const kernels::RopeParams& params, std::span<const float> table) override {
    arrive(Op::rope_rows);
    cpu_.rope_rows(x, n_rows, n_heads, head_dim, params, table);
  }
  void store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells, ConstTensor k,
                ConstTensor v, size_t k_width, size_t v_width) override {
    arrive(Op::store_kv);
    cpu_.store_kv(cache, layer, cells, k, v, k_width, v_width);
  }
  void attention(const AttentionOp& op, const KvCache& cache, ConstTensor q, Tensor out) override {
    arrive(Op::attention);
    cpu_.attention(op, cache, q, out);
  }

 private:
  void arrive(Op op) {
    if (total_ == fail_at_)
      throw Error("device lost (injected at op " + std::to_string(total_) + ")");
    ++counts_[static_cast<size_t>(op)];
    ++total_;
  }

  CpuBackend& cpu_;
  int fail_at_;
  std::array<int, static_cast<size_t>(Op::count)> counts_{};
  int total_ = 0;
};

}  // namespace cortiq::test
