#include "backends/vulkan/vulkan_backend.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "backends/vulkan/vulkan_buffer.hpp"
#include "backends/vulkan/vulkan_commands.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_kv_rows.hpp"
#include "backends/vulkan/vulkan_matrix.hpp"
#include "backends/vulkan/vulkan_ops.hpp"
#include "base/error.hpp"
#include "base/fp16.hpp"
#include "base/strings.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kv/kv_cache.hpp"

namespace cortiq::vulkan {

namespace {

constexpr size_t kFloat = sizeof(float);

}  // namespace

VulkanBackend::VulkanBackend(VulkanDevice& device, ThreadPool& pool)
    : device_(device), pool_(pool) {}

VulkanBackend::~VulkanBackend() = default;

void VulkanBackend::not_yet(std::string_view op) {
  throw Error("the Vulkan backend does not run " + std::string(op) + " on the device yet");
}

CommandBatch& VulkanBackend::batch() {
  if (!batch_) batch_ = std::make_unique<CommandBatch>(device_);
  return *batch_;
}

void VulkanBackend::abandon_pass() {
  batch_.reset();  // never submitted: nothing of it runs
  retired_.clear();
  arena_used_ = 0;
}

void VulkanBackend::finish() {
  if (batch_) {
    // The batch is gone whether or not it ran: a failed submit ends the pass.
    const std::unique_ptr<CommandBatch> recorded = std::move(batch_);
    recorded->submit_and_wait();
  }
  retired_.clear();
  arena_used_ = 0;
}

uint32_t VulkanBackend::add_buffer(size_t floats) {
  buffers_.push_back(std::make_unique<VulkanBuffer>(device_, std::max<size_t>(floats, 1) * kFloat));
  return static_cast<uint32_t>(buffers_.size() - 1);
}

VulkanBuffer& VulkanBackend::buffer_of(ConstTensor t, std::string_view op) const {
  if (t.on_host()) {
    throw Error("internal: the Vulkan backend's " + std::string(op) +
                " was given host memory instead of a device tensor");
  }
  const DeviceRegion r = t.region();
  if (r.buffer >= buffers_.size()) {
    throw Error("internal: the Vulkan backend's " + std::string(op) +
                " was given a tensor it did not make");
  }
  return *buffers_[r.buffer];
}

Tensor VulkanBackend::scratch(std::vector<float>& slot, size_t n) {
  const auto found = slots_.find(&slot);
  if (found == slots_.end()) {
    const uint32_t index = add_buffer(n);
    slots_.emplace(&slot, index);
    return Tensor::on_device({.buffer = index, .offset = 0}, n);
  }
  const uint32_t index = found->second;
  if (buffers_[index]->size() < n * kFloat) {
    // The new buffer first: when it cannot be had, the slot keeps the old.
    auto grown = std::make_unique<VulkanBuffer>(device_, n * kFloat);
    // Commands recorded against the old buffer may still read it.
    retired_.push_back(std::move(buffers_[index]));
    buffers_[index] = std::move(grown);
  }
  return Tensor::on_device({.buffer = index, .offset = 0}, n);
}

Tensor VulkanBackend::output_tensor(std::span<float> host, std::vector<float>& slot) {
  return scratch(slot, host.size());
}

void VulkanBackend::stage(std::span<const std::byte> bytes, const VulkanBuffer& dst,
                          uint64_t dst_offset) {
  if (bytes.empty()) return;
  if (!arena_ || arena_->size() < arena_used_ + bytes.size()) {
    if (arena_) retired_.push_back(std::move(arena_));
    const size_t size = std::max<size_t>(bytes.size(), size_t{1} << 20);
    arena_ = std::make_unique<VulkanBuffer>(device_, size, MemoryKind::host_visible);
    arena_used_ = 0;
  }
  arena_->upload(bytes, arena_used_);
  batch().copy(*arena_, arena_used_, dst, dst_offset, bytes.size());
  // Copies start at 4-byte offsets; keep the next one 16-byte aligned.
  arena_used_ += (bytes.size() + 15) / 16 * 16;
}

void VulkanBackend::copy_from_host(std::span<const float> src, Tensor dst) {
  if (src.empty()) return;
  stage(std::as_bytes(src), buffer_of(dst, "copy_from_host"), dst.region().offset * kFloat);
}

// n row copies of `width` floats in one command: copy i from float
// offsets at(i) = {into src, into dst} past each tensor's start.
template <class RowOffsets>
void VulkanBackend::copy_row_list(ConstTensor src, Tensor dst, size_t n, size_t width,
                                  std::string_view op, RowOffsets at) {
  if (width == 0 || n == 0) return;
  auto& regions = copy_regions_;
  regions.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto [from, to] = at(i);
    regions[i] = {.srcOffset = (src.region().offset + from) * kFloat,
                  .dstOffset = (dst.region().offset + to) * kFloat,
                  .size = width * kFloat};
  }
  batch().copy_regions(buffer_of(src, op), buffer_of(dst, op), regions);
}

void VulkanBackend::copy_rows(ConstTensor src, size_t src_stride, Tensor dst, size_t dst_stride,
                              size_t width, size_t n_rows) {
  copy_row_list(src, dst, n_rows, width, "copy_rows", [&](size_t r) {
    return std::pair{r * src_stride, r * dst_stride};
  });
}

void VulkanBackend::gather_rows(ConstTensor src, std::span<const int32_t> rows, Tensor dst,
                                size_t width) {
  copy_row_list(src, dst, rows.size(), width, "gather_rows", [&](size_t i) {
    return std::pair{static_cast<size_t>(rows[i]) * width, i * width};
  });
}

void VulkanBackend::scatter_rows(ConstTensor src, Tensor dst, std::span<const int32_t> rows,
                                 size_t width) {
  copy_row_list(src, dst, rows.size(), width, "scatter_rows", [&](size_t i) {
    return std::pair{i * width, static_cast<size_t>(rows[i]) * width};
  });
}

KvRowStorage::Factory VulkanBackend::kv_rows() const {
  return VulkanKvRows::on(device_);
}

void VulkanBackend::copy_to_host(ConstTensor src, std::span<float> dst) {
  if (dst.empty()) return;
  const VulkanBuffer& from = buffer_of(src, "copy_to_host");
  const size_t bytes = dst.size_bytes();
  if (!readback_ || readback_->size() < bytes) {
    readback_ = std::make_unique<VulkanBuffer>(device_, bytes, MemoryKind::host_visible);
  }
  batch().copy(from, src.region().offset * kFloat, *readback_, 0, bytes);
  finish();
  readback_->download(std::as_writable_bytes(dst), 0);
}

const VulkanMatrix& VulkanBackend::matrix_of(const kernels::WeightView& w) {
  auto& slot = matrices_[w.data];
  if (!slot) {
    const std::span<const std::byte> bytes(w.data, static_cast<size_t>(w.n_rows) * w.row_bytes);
    slot = std::make_unique<VulkanMatrix>(device_, w.type, w.n_rows, w.n_cols, bytes);
  }
  return *slot;
}

std::span<const float> VulkanBackend::alibi_slopes(float max_bias, int64_t n_head) {
  std::vector<float>& slopes = alibi_slopes_[{max_bias, n_head}];
  if (slopes.empty()) {
    for (int64_t h = 0; h < n_head; ++h)
      slopes.push_back(kernels::alibi_slope(max_bias, n_head, h));
  }
  return slopes;
}

VulkanBuffer& VulkanBackend::constant_of(std::span<const float> values) {
  auto& slot = constants_[values.data()];
  if (!slot) {
    slot = std::make_unique<VulkanBuffer>(device_, values.size_bytes());
    slot->upload(values);
  }
  return *slot;
}

void VulkanBackend::matmul(const kernels::WeightView& w, ConstTensor x, int64_t n_rows, Tensor y,
                           int64_t y_stride) {
  if (n_rows <= 0) return;
  if (!vulkan_matmul_supports(w.type)) {
    throw Error("the Vulkan backend has no matmul for " + std::string(ggml_type_name(w.type)) +
                " weights (" + std::string(w.name) + ")");
  }
  const VulkanMatrix& m = matrix_of(w);
  vulkan::matmul(batch(), m, buffer_of(x, "matmul"), x.region().offset, n_rows,
                 buffer_of(y, "matmul"), y.region().offset, y_stride);
}

void VulkanBackend::matmul_shared_input(std::span<const MatmulProduct> products, ConstTensor x,
                                        int64_t n_rows) {
  for (const MatmulProduct& p : products) matmul(*p.w, x, n_rows, p.y, p.y_stride);
}

void VulkanBackend::matmul_each_input(std::span<const MatmulProduct> products,
                                      std::span<const ConstTensor> inputs) {
  for (size_t i = 0; i < products.size(); ++i) {
    matmul(*products[i].w, inputs[i], 1, products[i].y, products[i].y_stride);
  }
}

void VulkanBackend::get_rows(const kernels::WeightView& table, std::span<const int32_t> ids,
                             Tensor out) {
  // The table stays in the mapped file: its rows are gathered here.
  host_rows_.resize(ids.size() * static_cast<size_t>(table.n_cols));
  kernels::get_rows(table, ids, host_rows_);
  copy_from_host(host_rows_, out.first(host_rows_.size()));
}

namespace {

// The rows of `width` a norm's weight (or bias) holds, which the rows of
// x take in turn (kernels/cpu/norm.hpp); 1 for none.
int64_t weight_rows(std::span<const float> weight, size_t width, std::string_view op) {
  if (weight.empty()) return 1;
  if (weight.size() % width != 0) {
    throw Error(strfmt("%.*s: a weight of %zu floats is no whole number of rows of %zu",
                       static_cast<int>(op.size()), op.data(), weight.size(), width));
  }
  return static_cast<int64_t>(weight.size() / width);
}

}  // namespace

void VulkanBackend::rms_norm_rows(ConstTensor x, std::span<const float> weight, float eps,
                                  Tensor out, size_t width) {
  if (x.empty()) return;
  const VulkanBuffer* w = weight.empty() ? nullptr : &constant_of(weight);
  vulkan::rms_norm_rows(batch(), buffer_of(x, "rms_norm_rows"), x.region().offset, w, eps,
                        buffer_of(out, "rms_norm_rows"), out.region().offset,
                        static_cast<int64_t>(width), static_cast<int64_t>(x.size() / width),
                        weight_rows(weight, width, "rms_norm_rows"));
}

void VulkanBackend::layer_norm_rows(ConstTensor x, std::span<const float> weight,
                                    std::span<const float> bias, float eps, Tensor out,
                                    size_t width) {
  if (x.empty()) return;
  vulkan::layer_norm_rows(batch(), {.x = &buffer_of(x, "layer_norm_rows"),
                                    .x_offset = x.region().offset,
                                    .weight = weight.empty() ? nullptr : &constant_of(weight),
                                    .bias = bias.empty() ? nullptr : &constant_of(bias),
                                    .eps = eps,
                                    .out = &buffer_of(out, "layer_norm_rows"),
                                    .out_offset = out.region().offset,
                                    .width = static_cast<int64_t>(width),
                                    .n_rows = static_cast<int64_t>(x.size() / width),
                                    .weight_rows = weight_rows(weight, width, "layer_norm_rows"),
                                    .bias_rows = weight_rows(bias, width, "layer_norm_rows")});
}

// out = op(x, b) for every element of out; b (a tensor's buffer or a
// constant's, from b_offset floats on) only for the ops with two operands.
void VulkanBackend::elementwise(ElementOp op, Tensor out, ConstTensor x, const VulkanBuffer* b,
                                uint64_t b_offset, uint32_t width, float p0, float p1,
                                std::string_view name) {
  if (out.empty()) return;
  vulkan::elementwise(batch(), {.op = op,
                                .n = static_cast<int64_t>(out.size()),
                                .x = &buffer_of(x, name),
                                .x_offset = x.region().offset,
                                .b = b,
                                .b_offset = b_offset,
                                .out = &buffer_of(out, name),
                                .out_offset = out.region().offset,
                                .width = width,
                                .p0 = p0,
                                .p1 = p1,
                                .gelu_table = reads_gelu_table(op) ? &gelu_table() : nullptr});
}

VulkanBuffer& VulkanBackend::gelu_table() {
  if (gelu_values_.empty()) {
    const std::span<const uint16_t, 65536> table = kernels::gelu_fp16_table();
    gelu_values_.resize(table.size());
    std::ranges::transform(table, gelu_values_.begin(), fp16_to_fp32);
  }
  return constant_of(gelu_values_);
}

void VulkanBackend::add(Tensor x, ConstTensor b) {
  elementwise(ElementOp::add, x, x, &buffer_of(b, "add"), b.region().offset, 0, 0, 0, "add");
}

void VulkanBackend::add_bias_rows(Tensor rows, std::span<const float> bias) {
  if (bias.empty() || rows.empty()) return;
  elementwise(ElementOp::add_bias_rows, rows, rows, &constant_of(bias), 0,
              static_cast<uint32_t>(bias.size()), 0, 0, "add_bias_rows");
}

void VulkanBackend::divide_rows(Tensor rows, std::span<const float> divisor) {
  if (divisor.empty() || rows.empty()) return;
  elementwise(ElementOp::divide_rows, rows, rows, &constant_of(divisor), 0,
              static_cast<uint32_t>(divisor.size()), 0, 0, "divide_rows");
}

void VulkanBackend::scale(Tensor x, float s) {
  elementwise(ElementOp::scale, x, x, nullptr, 0, 0, s, 0, "scale");
}

void VulkanBackend::scale_rows(Tensor x, ConstTensor factors, size_t width) {
  elementwise(ElementOp::scale_rows, x, x, &buffer_of(factors, "scale_rows"),
              factors.region().offset, static_cast<uint32_t>(width), 0, 0, "scale_rows");
}

void VulkanBackend::sum_row_groups(ConstTensor x, size_t group, Tensor out, size_t width) {
  if (out.empty()) return;
  vulkan::elementwise(batch(), {.op = ElementOp::sum_row_groups,
                                .n = static_cast<int64_t>(out.size()),
                                .x = &buffer_of(x, "sum_row_groups"),
                                .x_offset = x.region().offset,
                                .out = &buffer_of(out, "sum_row_groups"),
                                .out_offset = out.region().offset,
                                .width = static_cast<uint32_t>(width),
                                .group = static_cast<uint32_t>(group)});
}

void VulkanBackend::clamp(Tensor x, float lo, float hi) {
  elementwise(ElementOp::clamp, x, x, nullptr, 0, 0, lo, hi, "clamp");
}

void VulkanBackend::softcap(Tensor x, float cap) {
  elementwise(ElementOp::softcap, x, x, nullptr, 0, 0, cap, 0, "softcap");
}

void VulkanBackend::unary(UnaryOp op, Tensor x) {
  ElementOp code = ElementOp::silu;
  switch (op) {
    case UnaryOp::silu:
      code = ElementOp::silu;
      break;
    case UnaryOp::gelu:
      code = ElementOp::gelu;
      break;
    case UnaryOp::relu_sqr:
      code = ElementOp::relu_sqr;
      break;
    case UnaryOp::softplus:
      code = ElementOp::softplus;
      break;
    case UnaryOp::sigmoid:
      code = ElementOp::sigmoid;
      break;
    case UnaryOp::relu:
      code = ElementOp::relu;
      break;
    case UnaryOp::silu_ratio:
      code = ElementOp::silu_ratio;
      break;
  }
  elementwise(code, x, x, nullptr, 0, 0, 0, 0, "unary");
}

void VulkanBackend::xielu(Tensor x, const kernels::XieluParams& params) {
  if (x.empty()) return;
  VulkanBuffer& buffer = buffer_of(x, "xielu");
  vulkan::elementwise(batch(), {.op = ElementOp::xielu,
                                .n = static_cast<int64_t>(x.size()),
                                .x = &buffer,
                                .x_offset = x.region().offset,
                                .out = &buffer,
                                .out_offset = x.region().offset,
                                .p0 = params.alpha_n,
                                .p1 = params.alpha_p,
                                .p2 = params.beta,
                                .p3 = params.eps});
}

void VulkanBackend::glu(GluOp op, ConstTensor gate, ConstTensor up, Tensor out) {
  ElementOp code = ElementOp::swiglu;
  float p0 = 0, p1 = 0;
  switch (op) {
    case GluOp::swiglu:
      code = ElementOp::swiglu;
      break;
    case GluOp::geglu:
      code = ElementOp::geglu;
      break;
    case GluOp::reglu:
      code = ElementOp::reglu;
      break;
    case GluOp::swiglu_oai:
      code = ElementOp::swiglu_oai;
      p0 = kernels::kSwigluOaiAlpha;
      p1 = kernels::kSwigluOaiLimit;
      break;
  }
  elementwise(code, out, gate, &buffer_of(up, "glu"), up.region().offset, 0, p0, p1, "glu");
}

void VulkanBackend::glu_halves(GluOp op, ConstTensor both, Tensor out, size_t width) {
  if (op != GluOp::swiglu && op != GluOp::geglu) not_yet("glu_halves of this activation");
  const ElementOp code = op == GluOp::swiglu ? ElementOp::swiglu_halves : ElementOp::geglu_halves;
  elementwise(code, out, both, nullptr, 0, static_cast<uint32_t>(width), 0, 0, "glu_halves");
}

void VulkanBackend::rope_rows(Tensor x, size_t n_rows, int64_t n_heads, int64_t head_dim,
                              const kernels::RopeParams& params, std::span<const float> table) {
  const size_t n = n_rows * static_cast<size_t>(params.n_dims);
  if (n == 0) return;
  const Tensor on_device = scratch(rope_table_slot_, n);
  copy_from_host(table.first(n), on_device);
  vulkan::rope_rows(batch(), {.x = &buffer_of(x, "rope_rows"),
                              .x_offset = x.region().offset,
                              .table = &buffer_of(on_device, "rope_rows"),
                              .table_offset = on_device.region().offset,
                              .n_rows = static_cast<int64_t>(n_rows),
                              .n_heads = n_heads,
                              .head_dim = head_dim,
                              .n_dims = params.n_dims,
                              .neox = params.neox});
}

namespace {

const VulkanKvRows& device_rows(const KvCache& cache, int64_t layer, std::string_view op) {
  const auto* rows = dynamic_cast<const VulkanKvRows*>(&cache.row_storage(layer));
  if (rows == nullptr) {
    throw Error("the Vulkan backend's " + std::string(op) +
                " needs a KV cache whose rows are on the device");
  }
  return *rows;
}

}  // namespace

void VulkanBackend::store_kv(KvCache& cache, int64_t layer, std::span<const int32_t> cells,
                             ConstTensor k, ConstTensor v, size_t k_width, size_t v_width) {
  const VulkanKvRows& rows = device_rows(cache, layer, "store_kv");
  if (cache.shape().type == KvType::f16) {
    store_kv_f16(cache, rows, layer, cells, KvSide::keys, k, k_width);
    if (v_width != 0) store_kv_f16(cache, rows, layer, cells, KvSide::values, v, v_width);
    return;
  }
  const VulkanBuffer& keys = buffer_of(k, "store_kv");
  const VulkanBuffer* values = v_width == 0 ? nullptr : &buffer_of(v, "store_kv");
  for (size_t r = 0; r < cells.size(); ++r) {
    batch().copy(keys, (k.region().offset + r * k_width) * kFloat, rows.buffer(KvSide::keys),
                 cache.row_offset(KvSide::keys, layer, cells[r]), k_width * kFloat);
    if (values == nullptr) continue;
    batch().copy(*values, (v.region().offset + r * v_width) * kFloat, rows.buffer(KvSide::values),
                 cache.row_offset(KvSide::values, layer, cells[r]), v_width * kFloat);
  }
}

// One side's rows into an f16 cache: rounded and packed on the device, each
// row from the word its cell's offset names.
void VulkanBackend::store_kv_f16(const KvCache& cache, const VulkanKvRows& storage, int64_t layer,
                                 std::span<const int32_t> cells, KvSide side, ConstTensor rows,
                                 size_t width) {
  constexpr std::string_view kOdd = "an f16 KV cache whose rows are an odd number of halves wide";
  if (width % 2 != 0) not_yet(kOdd);
  auto& offsets = kv_store_rows_;
  offsets.resize(cells.size());
  for (size_t r = 0; r < cells.size(); ++r) {
    // Another layer's odd rows may leave this one's off a whole word.
    const size_t bytes = cache.row_offset(side, layer, cells[r]);
    if (bytes % 4 != 0) not_yet(kOdd);
    offsets[r] = static_cast<uint32_t>(bytes / 4);
  }
  const Tensor on_device = scratch(kv_store_rows_slot_, offsets.size());
  stage(std::as_bytes(std::span(offsets)), buffer_of(on_device, "store_kv"),
        on_device.region().offset * kFloat);
  vulkan::kv_store_f16(batch(), {.src = &buffer_of(rows, "store_kv"),
                                 .src_offset = rows.region().offset,
                                 .dst = &storage.buffer(side),
                                 .dst_rows = &buffer_of(on_device, "store_kv"),
                                 .n_rows = static_cast<int64_t>(cells.size()),
                                 .width = static_cast<int64_t>(width)});
}

// The row table of attention.comp: per query row its positions, then per
// position of each sequence its key and value rows.
void VulkanBackend::attention(const AttentionOp& op, const KvCache& cache, ConstTensor q,
                              Tensor out) {
  const VulkanKvRows& storage = device_rows(cache, op.layer, "attention");
  const kernels::AttentionShape& shape = op.shape;
  const std::span<const BatchRow> rows = op.rows;
  const size_t n = rows.size();
  if (n == 0) return;
  const bool values_in_keys = cache.shape().layers[static_cast<size_t>(op.layer)].values_in_keys;
  const KvSide value_side = values_in_keys ? KvSide::keys : KvSide::values;
  const bool f16 = cache.shape().type == KvType::f16;
  const size_t element = f16 ? sizeof(uint16_t) : kFloat;  // the table's offsets count these
  // Bidirectional rows read every position their sequence has.
  auto& seq_end = attention_seq_end_;
  seq_end.clear();
  for (const BatchRow& row : rows) {
    int64_t& end = seq_end[row.seq];
    end = std::max<int64_t>(end, row.pos + 1);
  }
  auto& table = attention_rows_;
  table.assign(3 * n, 0);
  auto& seq_table = attention_seq_table_;  // a sequence's first entry
  seq_table.clear();
  int64_t max_kv = 1;
  for (size_t r = 0; r < n; ++r) {
    const BatchRow& row = rows[r];
    const int64_t n_kv = op.causal ? row.pos + 1 : seq_end[row.seq];
    const int64_t start = op.window > 0  ? std::max<int64_t>(0, n_kv - op.window)
                          : op.chunk > 0 ? row.pos / op.chunk * op.chunk
                                         : 0;
    max_kv = std::max(max_kv, n_kv);
    auto [it, fresh] = seq_table.try_emplace(row.seq, static_cast<uint32_t>(table.size()));
    if (fresh) {
      const std::span<const int32_t> cells = cache.cells(row.seq);
      const int64_t end = seq_end[row.seq];
      for (int64_t j = 0; j < end; ++j) {
        // A position a window already dropped maps to a row reused since:
        // in the buffer, and never read (the row's start is past it).
        const int32_t cell = cells[static_cast<size_t>(j)];
        table.push_back(
            static_cast<uint32_t>(cache.row_offset(KvSide::keys, op.layer, cell) / element));
        table.push_back(
            static_cast<uint32_t>(cache.row_offset(value_side, op.layer, cell) / element));
      }
    }
    table[3 * r] = static_cast<uint32_t>(start);
    table[3 * r + 1] = static_cast<uint32_t>(n_kv);
    table[3 * r + 2] = it->second;
  }
  const Tensor rows_on_device = scratch(attention_rows_slot_, table.size());
  stage(std::as_bytes(std::span(table)), buffer_of(rows_on_device, "attention"),
        rows_on_device.region().offset * kFloat);
  const size_t n_scores = n * static_cast<size_t>(shape.n_head) * static_cast<size_t>(max_kv);
  const Tensor scores = scratch(scores_slot_, n_scores);
  const bool softcap = shape.softcap > 0.0f;
  vulkan::attention(batch(),
                    {.f16 = f16,
                     .q = &buffer_of(q, "attention"),
                     .q_offset = q.region().offset,
                     .keys = &storage.buffer(KvSide::keys),
                     .values = &storage.buffer(value_side),
                     .rows = &buffer_of(rows_on_device, "attention"),
                     .sinks = shape.sinks.empty() ? nullptr : &constant_of(shape.sinks),
                     .slopes = shape.alibi_max_bias > 0.0f
                                   ? &constant_of(alibi_slopes(shape.alibi_max_bias, shape.n_head))
                                   : nullptr,
                     .scores = &buffer_of(scores, "attention"),
                     .out = &buffer_of(out, "attention"),
                     .out_offset = out.region().offset,
                     .n_rows = static_cast<int64_t>(n),
                     .n_head = shape.n_head,
                     .n_head_kv = shape.n_head_kv,
                     .dk = shape.head_dim_k,
                     .dv = shape.head_dim_v,
                     .max_kv = max_kv,
                     .scale = shape.scale,
                     .dot_scale = softcap ? (shape.softcap_scale != 0.0f ? shape.softcap_scale
                                                                         : 1.0f / shape.softcap)
                                          : shape.scale,
                     .softcap = softcap ? shape.softcap : 0.0f});
}

}  // namespace cortiq::vulkan
