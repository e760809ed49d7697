#include "model/weights.hpp"

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "quant/quantize.hpp"

namespace cortiq {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

const gguf::TensorInfo& require_tensor(const gguf::GgufFile& file, std::string_view name) {
  const auto* info = file.find_tensor(name);
  if (!info) throw Error(file.path() + ": missing tensor " + std::string(name));
  return *info;
}

void check_shape(const gguf::GgufFile& file, const gguf::TensorInfo& info,
                 const std::vector<int64_t>& expected) {
  // Trailing dimensions of 1 are the same shape, either side (a stack of
  // one expert or head is written as a matrix).
  const auto trimmed = [](std::vector<int64_t> shape) {
    while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
    return shape;
  };
  if (trimmed(info.shape) != trimmed(expected)) {
    throw Error(strfmt("%s: tensor %s has shape %s, expected %s", file.path().c_str(),
                       info.name.c_str(), shape_text(info.shape).c_str(),
                       shape_text(expected).c_str()));
  }
}

}  // namespace

bool WeightBinder::has(std::string_view name) const {
  return file_.find_tensor(name) != nullptr;
}

int64_t WeightBinder::rows_of(const std::string& name, int64_t /*written*/) {
  const gguf::TensorInfo* info = file_.find_tensor(name);
  return info != nullptr && info->shape.size() >= 2 ? info->shape[1] : 0;
}

kernels::WeightView WeightBinder::matrix(std::string_view name, int64_t n_cols,
                                         int64_t n_rows) const {
  const auto& info = require_tensor(file_, name);
  used_.insert(info.name);
  check_shape(file_, info,
              n_rows == 1 ? std::vector<int64_t>{n_cols} : std::vector{n_cols, n_rows});
  require_supported_weight_type(info.type, info.name);
  const auto row_bytes = ggml_row_bytes(info.type, static_cast<uint64_t>(n_cols));
  if (!row_bytes || *row_bytes * static_cast<uint64_t>(n_rows) != info.data.size()) {
    throw Error(file_.path() + ": tensor " + info.name + " has the wrong size");
  }
  kernels::WeightView view;
  view.type = info.type;
  view.n_rows = n_rows;
  view.n_cols = n_cols;
  view.row_bytes = static_cast<size_t>(*row_bytes);
  view.data = info.data.data();
  view.name = info.name;
  if (!packed_ || n_rows <= 1) return view;
  view = packed_->pack(view);
  // The kernels read the packed copy; the file's pages come back only for
  // what else reads them (embedding rows of a tied output).
  if (view.packed) file_.drop_pages(info.data);
  return view;
}

void WeightBinder::experts(std::vector<kernels::WeightView>& views, const std::string& name,
                           int64_t n_cols, int64_t n_rows, int64_t n_expert, bool required,
                           int64_t n_parts) {
  views.clear();
  if (!required && !has(name)) return;
  const auto& info = require_tensor(file_, name);
  used_.insert(info.name);
  check_shape(file_, info, {n_cols, n_rows, n_expert});
  require_supported_weight_type(info.type, info.name);
  const auto row_bytes = ggml_row_bytes(info.type, static_cast<uint64_t>(n_cols));
  if (!row_bytes || *row_bytes * static_cast<uint64_t>(n_rows * n_expert) != info.data.size()) {
    throw Error(file_.path() + ": tensor " + info.name + " has the wrong size");
  }
  // Each expert's rows are one contiguous matrix of the stack, cut in
  // n_parts contiguous parts.
  if (n_parts < 1 || n_rows % n_parts != 0) {
    throw Error(file_.path() + ": tensor " + info.name + " cannot be cut in " +
                std::to_string(n_parts) + " parts");
  }
  const int64_t part_rows = n_rows / n_parts;
  const size_t part_bytes = static_cast<size_t>(*row_bytes * static_cast<uint64_t>(part_rows));
  bool all_packed = packed_ != nullptr;
  for (int64_t part = 0; part < n_expert * n_parts; ++part) {
    kernels::WeightView view;
    view.type = info.type;
    view.n_rows = part_rows;
    view.n_cols = n_cols;
    view.row_bytes = static_cast<size_t>(*row_bytes);
    view.data = info.data.data() + static_cast<size_t>(part) * part_bytes;
    view.name = info.name;
    if (packed_ != nullptr) view = packed_->pack(view);
    all_packed = all_packed && view.packed != nullptr;
    views.push_back(view);
  }
  if (all_packed) file_.drop_pages(info.data);
}

kernels::WeightView WeightBinder::optional_matrix(std::string_view name, int64_t n_cols,
                                                  int64_t n_rows) const {
  return has(name) ? matrix(name, n_cols, n_rows) : kernels::WeightView{};
}

std::vector<float> WeightBinder::vector(std::string_view name, int64_t n) const {
  const auto view = matrix(name, n, 1);
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(view.type, view.row(0), out);
  return out;
}

std::vector<float> WeightBinder::optional_vector(std::string_view name, int64_t n) const {
  return has(name) ? vector(name, n) : std::vector<float>{};
}

void WeightBinder::matrix(kernels::WeightView& view, const std::string& name, int64_t n_cols,
                          int64_t n_rows, bool required) {
  view = required ? matrix(name, n_cols, n_rows) : optional_matrix(name, n_cols, n_rows);
}

void WeightBinder::vector(std::vector<float>& values, const std::string& name, int64_t n,
                          TensorKind, bool required) {
  values = required ? vector(name, n) : optional_vector(name, n);
}

void WeightBinder::table(std::vector<float>& values, const std::string& name, int64_t n_cols,
                         int64_t n_rows, TensorKind, bool required) {
  values.clear();
  if (!required && !has(name)) return;
  // Read as values, never packed for the integer kernels.
  kernels::PackedWeightStore* const packed = packed_;
  packed_ = nullptr;
  const auto view = matrix(name, n_cols, n_rows);
  packed_ = packed;
  values.resize(static_cast<size_t>(n_cols * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(
        view.type, view.row(r),
        std::span(values).subspan(static_cast<size_t>(r * n_cols), static_cast<size_t>(n_cols)));
  }
}

void WeightBinder::shaped(std::vector<float>& values, const std::string& name,
                          const std::vector<int64_t>& shape, TensorKind, bool required) {
  values.clear();
  if (!required && !has(name)) return;
  const auto& info = require_tensor(file_, name);
  // Dimensions of one change neither the values nor their order.
  const auto squeezed = [](const std::vector<int64_t>& dims) {
    std::vector<int64_t> out;
    for (const int64_t d : dims) {
      if (d != 1) out.push_back(d);
    }
    return out;
  };
  if (squeezed(info.shape) != squeezed(shape)) {
    throw Error(strfmt("%s: tensor %s has shape %s, expected %s", file_.path().c_str(),
                       info.name.c_str(), shape_text(info.shape).c_str(),
                       shape_text(shape).c_str()));
  }
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  used_.insert(info.name);
  require_supported_weight_type(info.type, info.name);
  const auto row_bytes = ggml_row_bytes(info.type, static_cast<uint64_t>(n));
  if (!row_bytes || *row_bytes != info.data.size()) {
    throw Error(file_.path() + ": tensor " + info.name + " has the wrong size");
  }
  values.resize(static_cast<size_t>(n));
  dequantize_row(info.type, info.data, values);
}

void WeightBinder::scale(float& value, const std::string& name) {
  value = has(name) ? vector(name, 1)[0] : 1.0f;
}

void WeightBinder::without_effect(const std::string& name, int64_t n, TensorKind) {
  if (!has(name)) return;
  vector(name, n);  // checked and marked used
  without_effect_.push_back(name);
}

void WeightBinder::check_all_used(std::string_view arch) const {
  for (const gguf::TensorInfo& info : file_.tensors()) {
    if (used_.contains(info.name)) continue;
    throw Error(file_.path() + ": tensor " + info.name + " is not used by architecture " +
                std::string(arch) + " (a file is run completely or not at all)");
  }
  if (!without_effect_.empty()) {
    LOG_WARN(
        "%s: %zu tensors (e.g. %s) have no effect: llama.cpp reads them for %s but "
        "applies them nowhere, and Cortiq matches it",
        file_.path().c_str(), without_effect_.size(), without_effect_.front().c_str(),
        std::string(arch).c_str());
  }
}

}  // namespace cortiq
