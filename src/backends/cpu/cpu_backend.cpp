#include "backends/cpu/cpu_backend.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "backends/scratch.hpp"
#include "base/error.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"

namespace cortiq {

namespace {

// Elements per share of an element-wise op: below this one thread does it
// all. Element-wise ops are an exp or a table lookup per element, worth
// both cores even at decode.
constexpr int64_t kElementGrain = 2048;
constexpr int64_t kSoftcapGrain = 16384;

// Query rows computed together by attention_rows: consecutive rows of one
// sequence share their cache rows' loads.
constexpr int64_t kAttentionRowTile = 16;

template <typename Fn>
void for_each_share(ThreadPool& pool, size_t n, Fn&& fn) {
  pool.parallel_for(
      static_cast<int64_t>(n),
      [&](int64_t begin, int64_t end) {
        fn(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
      },
      kElementGrain);
}

void apply_glu(GluOp op, std::span<const float> gate, std::span<const float> up,
               std::span<float> out) {
  switch (op) {
    case GluOp::swiglu:
      kernels::swiglu(gate, up, out);
      return;
    case GluOp::geglu:
      kernels::geglu(gate, up, out);
      return;
    case GluOp::reglu:
      for (size_t i = 0; i < out.size(); ++i) out[i] = (gate[i] > 0.0f ? gate[i] : 0.0f) * up[i];
      return;
    case GluOp::swiglu_oai:
      kernels::swiglu_oai(gate, up, out, kernels::kSwigluOaiAlpha, kernels::kSwigluOaiLimit);
      return;
  }
}

// One row's heads [h0, h1) of KV head kh: attention_rows over views that
// start at those heads, as a layer of h1 - h0 heads sharing one KV head.
// Each head's result is computed alone, so the bits are those of the
// whole KV head's call.
void attend_head_range(std::span<const float> q_row, int64_t kv_start, int64_t n_kv,
                       kernels::KvRowsView keys, kernels::KvRowsView values,
                       const kernels::AttentionShape& shape, int64_t kh, int64_t h0, int64_t h1,
                       std::span<float> out_row, std::span<float> scratch) {
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t first = kh * group + h0, n = h1 - h0;
  const auto dk = static_cast<size_t>(shape.head_dim_k), dv = static_cast<size_t>(shape.head_dim_v);
  keys.base += static_cast<size_t>(kh) * dk * (keys.f16 ? 2 : 4);
  values.base += static_cast<size_t>(kh) * dv * (values.f16 ? 2 : 4);
  kernels::AttentionShape part = shape;
  part.n_head = n;
  part.n_head_kv = 1;
  if (!shape.sinks.empty()) part.sinks = shape.sinks.subspan(static_cast<size_t>(first), n);
  const int64_t start[] = {kv_start}, count[] = {n_kv};
  kernels::attention_rows(q_row.subspan(static_cast<size_t>(first) * dk, n * dk), start, count,
                          keys, values, part,
                          out_row.subspan(static_cast<size_t>(first) * dv, n * dv), scratch, 0, 1);
}

}  // namespace

std::span<const kernels::MatmulOutput> CpuBackend::kernel_products(
    std::span<const MatmulProduct> products) {
  auto& out = scratch_.products;
  out.clear();
  for (const MatmulProduct& p : products) out.push_back({p.w, p.y.host(), p.y_stride});
  return out;
}

Tensor CpuBackend::scratch(std::vector<float>& slot, size_t n) {
  return grow_scratch(slot, n);
}

void CpuBackend::copy_from_host(std::span<const float> src, Tensor dst) {
  const std::span<float> to = dst.host();
  if (to.data() != src.data()) std::ranges::copy(src.first(to.size()), to.begin());
}

void CpuBackend::copy_to_host(ConstTensor src, std::span<float> dst) {
  const std::span<const float> from = src.host();
  if (from.data() != dst.data()) std::ranges::copy(from.first(dst.size()), dst.begin());
}

void CpuBackend::copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride,
                           size_t width, size_t n_rows) {
  const std::span<const float> from = src;
  const std::span<float> to = dst;
  for (size_t r = 0; r < n_rows; ++r) {
    // A plain loop: g++ 12 warns falsely (-Wstringop-overflow) on copies here.
    for (size_t i = 0; i < width; ++i) to[r * dst_stride + i] = from[r * src_stride + i];
  }
}

namespace {

// Row `from_row` of `from` into row `to_row` of `to`, rows of `width`.
void copy_row(std::span<const float> from, size_t from_row, std::span<float> to, size_t to_row,
              size_t width) {
  std::ranges::copy(from.subspan(from_row * width, width),
                    to.begin() + static_cast<std::ptrdiff_t>(to_row * width));
}

}  // namespace

void CpuBackend::gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                             size_t width) {
  for (size_t i = 0; i < rows.size(); ++i) {
    copy_row(src, static_cast<size_t>(rows[i]), dst, i, width);
  }
}

void CpuBackend::scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                              size_t width) {
  for (size_t i = 0; i < rows.size(); ++i) {
    copy_row(src, i, dst, static_cast<size_t>(rows[i]), width);
  }
}

Tensor CpuBackend::output_tensor(std::span<float> host, std::vector<float>& /*slot*/) {
  return host;
}

void CpuBackend::matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
                        int64_t y_stride) {
  kernels::matmul(w, x.host(), n_rows, y.host(), y_stride, pool_, scratch_.matmul);
}

void CpuBackend::matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                                     int64_t n_rows) {
  kernels::matmul_shared_input(kernel_products(products), x.host(), n_rows, pool_, scratch_.matmul);
}

void CpuBackend::matmul_each_input(std::span<const MatmulProduct> products,
                                   std::span<const ConstTensor> inputs) {
  auto& spans = scratch_.inputs;
  spans.clear();
  for (const ConstTensor& in : inputs) spans.push_back(in.host());
  kernels::matmul_each_input(kernel_products(products), spans, pool_, scratch_.matmul);
}

void CpuBackend::get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                          Tensor out) {
  kernels::get_rows(table, ids, out.host());
}

void CpuBackend::rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps, Tensor out,
                               size_t width) {
  kernels::rms_norm_rows(x.host(), weight, eps, out.host(), width);
}

void CpuBackend::layer_norm_rows(ConstTensor x, std::span<const float> weight,
                                 std::span<const float> bias, float eps, Tensor out, size_t width) {
  kernels::layer_norm_rows(x.host(), weight, bias, eps, out.host(), width);
}

void CpuBackend::add(Tensor x, ConstTensor b) {
  kernels::add_inplace(x.host(), b.host());
}

void CpuBackend::add_bias_rows(Tensor rows, std::span<const float> bias) {
  kernels::add_bias_rows(rows.host(), bias);
}

void CpuBackend::divide_rows(Tensor rows, std::span<const float> divisor) {
  kernels::divide_rows(rows.host(), divisor);
}

void CpuBackend::scale(Tensor x, float s) {
  kernels::scale_inplace(x.host(), s);
}

void CpuBackend::scale_rows(Tensor x, ConstTensor factors, size_t width) {
  const std::span<float> all = x.host();
  const std::span<const float> f = factors.host();
  if (width == 1) {  // an element-wise product
    for (size_t i = 0; i < all.size(); ++i) all[i] *= f[i];
    return;
  }
  for (size_t r = 0; r < all.size() / width; ++r) {
    kernels::scale_inplace(all.subspan(r * width, width), f[r]);
  }
}

void CpuBackend::sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) {
  const std::span<const float> in = x.host();
  const std::span<float> o = out.host();
  for (size_t r = 0; r < o.size() / width; ++r) {
    const auto sum = o.subspan(r * width, width);
    std::ranges::copy(in.subspan(r * group * width, width), sum.begin());
    for (size_t j = 1; j < group; ++j) {
      kernels::add_inplace(sum, in.subspan((r * group + j) * width, width));
    }
  }
}

void CpuBackend::clamp(Tensor x, float lo, float hi) {
  kernels::clamp_inplace(x.host(), lo, hi);
}

void CpuBackend::softcap(Tensor x, float cap) {
  // A libm tanhf per element: 256k of them (a Gemma vocabulary) are ~2 ms
  // on one core, so both cores take a share.
  const std::span<float> all = x.host();
  pool_.parallel_for(
      static_cast<int64_t>(all.size()),
      [&](int64_t begin, int64_t end) {
        kernels::softcap_inplace(
            all.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin)), cap);
      },
      kSoftcapGrain);
}

void CpuBackend::unary(UnaryOp op, Tensor x) {
  const std::span<float> all = x.host();
  for_each_share(pool_, all.size(), [&](size_t begin, size_t count) {
    const auto part = all.subspan(begin, count);
    switch (op) {
      case UnaryOp::silu:
        kernels::silu_inplace(part);
        return;
      case UnaryOp::gelu:
        kernels::gelu_inplace(part);
        return;
      case UnaryOp::relu_sqr:
        kernels::relu_sqr_inplace(part);
        return;
      case UnaryOp::softplus:
        kernels::softplus_inplace(part);
        return;
      case UnaryOp::sigmoid:
        for (float& v : part) v = kernels::sigmoid(v);
        return;
      case UnaryOp::relu:
        for (float& v : part) v = v > 0.0f ? v : 0.0f;
        return;
      case UnaryOp::silu_ratio:
        for (float& v : part) v = v / (1.0f + std::exp(-v)) / v;
        return;
    }
  });
}

void CpuBackend::xielu(Tensor x, const kernels::XieluParams& params) {
  const std::span<float> all = x.host();
  for_each_share(pool_, all.size(), [&](size_t begin, size_t count) {
    kernels::xielu_inplace(all.subspan(begin, count), params);
  });
}

void CpuBackend::glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) {
  const std::span<const float> g = gate.host(), u = up.host();
  const std::span<float> o = out.host();
  for_each_share(pool_, o.size(), [&](size_t begin, size_t count) {
    apply_glu(op, g.subspan(begin, count), u.subspan(begin, count), o.subspan(begin, count));
  });
}

void CpuBackend::glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) {
  const std::span<const float> b = both.host();
  const std::span<float> o = out.host();
  pool_.parallel_for(
      static_cast<int64_t>(o.size() / width),
      [&](int64_t begin, int64_t end) {
        for (auto r = static_cast<size_t>(begin); r < static_cast<size_t>(end); ++r) {
          const auto row = b.subspan(r * 2 * width, 2 * width);
          apply_glu(op, row.first(width), row.subspan(width), o.subspan(r * width, width));
        }
      },
      1);
}

void CpuBackend::rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                           const kernels::RopeParams& params, std::span<const float> table) {
  const std::span<float> all = x.host();
  const auto width = static_cast<size_t>(n_heads * head_dim);
  const auto dims = static_cast<size_t>(params.n_dims);
  for (size_t r = 0; r < n_rows; ++r) {
    kernels::rope_apply(all.subspan(r * width, width), n_heads, head_dim, params,
                        table.subspan(r * dims, dims));
  }
}

void CpuBackend::store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells,
                          ConstTensor k, ConstTensor v, size_t k_width, size_t v_width) {
  const std::span<const float> keys = k.host(), values = v.host();
  for (size_t r = 0; r < cells.size(); ++r) {
    cache.store_k(layer, cells[r], keys.subspan(r * k_width, k_width));
    if (v_width != 0) cache.store_v(layer, cells[r], values.subspan(r * v_width, v_width));
  }
}

// Rows are cut into tiles (consecutive rows of one sequence, at most
// kAttentionRowTile), and the work units are (tile, KV head) pairs: unit i
// goes to slot i % n_slots, a few slots per thread, each to whichever
// thread is free. Later rows attend to more positions, so interleaving
// keeps the slots even; splitting by KV head keeps both cores busy at
// decode, where there is a single row.
void CpuBackend::attention(const AttentionOp& op, const KvCache& cache, ConstTensor q_tensor,
                           Tensor out_tensor) {
  const std::span<const float> q = q_tensor.host();
  const std::span<float> out = out_tensor.host();
  const kernels::AttentionShape& shape = op.shape;
  const std::span<const BatchRow> rows = op.rows;
  auto& buf = scratch_;
  const int n_threads = pool_.size();
  int64_t max_kv = 0;
  for (const auto& row : rows) max_kv = std::max<int64_t>(max_kv, row.pos + 1);
  // A tile's rows are consecutive positions of one sequence: with a window
  // they span at most window + tile - 1 positions.
  const int64_t limit = op.window > 0 ? op.window : op.chunk;
  const int64_t max_span = limit > 0 ? std::min(max_kv, limit + kAttentionRowTile - 1) : max_kv;
  if (buf.scores.size() < static_cast<size_t>(n_threads)) buf.scores.resize(n_threads);
  for (auto& s : buf.scores) {
    grow_scratch(s, kernels::attention_scratch_floats(shape, kAttentionRowTile, max_span));
  }
  const auto qw = static_cast<size_t>(shape.n_head * shape.head_dim_k);
  const auto ow = static_cast<size_t>(shape.n_head * shape.head_dim_v);
  const size_t n = rows.size();
  const auto n_kv_heads = static_cast<size_t>(shape.n_head_kv);
  // A lone row (decode) with fewer KV heads than threads: each KV head's
  // query heads are shared out, so that every thread works (MQA and latent
  // attention have one KV head). Not with ALiBi, whose slopes number the
  // heads of the whole layer.
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t lone_row_parts =
      static_cast<int64_t>(n_kv_heads) < n_threads && shape.alibi_max_bias == 0.0f
          ? std::min<int64_t>(group, (n_threads + shape.n_head_kv - 1) / shape.n_head_kv)
          : 1;
  // Bidirectional attention (encoders): every row reads every position its
  // sequence has after the pass, so a sequence must come in one pass.
  std::vector<int64_t> seq_end;
  if (!op.causal) {
    for (const auto& row : rows) {
      const auto seq = static_cast<size_t>(row.seq);
      if (seq >= seq_end.size()) seq_end.resize(seq + 1, 0);
      seq_end[seq] = std::max<int64_t>(seq_end[seq], row.pos + 1);
    }
  }
  const int64_t il = op.layer;
  const int64_t n_slots = n_threads * ThreadPool::kChunksPerThread;
  pool_.run_slots(n_slots, [&](int64_t slot, int thread) {
    auto& scratch = buf.scores[static_cast<size_t>(thread)];
    std::array<int64_t, kAttentionRowTile> n_kv, kv_start;
    size_t unit = 0;
    for (size_t begin = 0; begin < n;) {
      size_t end = begin + 1;
      while (end < n && end - begin < kAttentionRowTile && rows[end].seq == rows[begin].seq) {
        ++end;
      }
      for (size_t r = begin; r < end; ++r) {
        n_kv[r - begin] = op.causal ? rows[r].pos + 1 : seq_end[static_cast<size_t>(rows[r].seq)];
        kv_start[r - begin] = op.window > 0  ? std::max<int64_t>(0, n_kv[r - begin] - op.window)
                              : op.chunk > 0 ? rows[r].pos / op.chunk * op.chunk
                                             : 0;
      }
      const int32_t seq = rows[begin].seq;
      const int64_t parts = end - begin == 1 ? lone_row_parts : 1;
      for (size_t kh = 0; kh < n_kv_heads; ++kh) {
        for (int64_t part = 0; part < parts; ++part, ++unit) {
          if (unit % static_cast<size_t>(n_slots) != static_cast<size_t>(slot)) continue;
          if (parts > 1) {
            attend_head_range(q.subspan(begin * qw, qw), kv_start[0], n_kv[0], cache.keys(il, seq),
                              cache.values(il, seq), shape, static_cast<int64_t>(kh),
                              group * part / parts, group * (part + 1) / parts,
                              out.subspan(begin * ow, ow), scratch);
            continue;
          }
          kernels::attention_rows(
              q.subspan(begin * qw, (end - begin) * qw), std::span(kv_start).first(end - begin),
              std::span(n_kv).first(end - begin), cache.keys(il, seq), cache.values(il, seq), shape,
              out.subspan(begin * ow, (end - begin) * ow), scratch, static_cast<int64_t>(kh),
              static_cast<int64_t>(kh) + 1);
        }
      }
      begin = end;
    }
  });
}

}  // namespace cortiq
