#include "model/tensor_table.hpp"

#include "base/strings.hpp"

namespace cortiq {

void TensorSpecCollector::matrix(kernels::WeightView&, const std::string& name, int64_t n_cols,
                                 int64_t n_rows, bool required) {
  std::vector<int64_t> shape{n_cols};
  if (n_rows != 1) shape.push_back(n_rows);
  specs_.push_back({name, std::move(shape), TensorKind::matrix, required});
}

void TensorSpecCollector::router(kernels::WeightView&, const std::string& name, int64_t n_cols,
                                 int64_t n_rows, bool required) {
  specs_.push_back({name, {n_cols, n_rows}, TensorKind::router, required});
}

void TensorSpecCollector::experts(std::vector<kernels::WeightView>&, const std::string& name,
                                  int64_t n_cols, int64_t n_rows, int64_t n_expert, bool required,
                                  int64_t /*n_parts*/) {
  specs_.push_back({name, {n_cols, n_rows, n_expert}, TensorKind::matrix, required});
}

void TensorSpecCollector::vector(std::vector<float>&, const std::string& name, int64_t n,
                                 TensorKind kind, bool required) {
  specs_.push_back({name, {n}, kind, required});
}

void TensorSpecCollector::table(std::vector<float>&, const std::string& name, int64_t n_cols,
                                int64_t n_rows, TensorKind kind, bool required) {
  specs_.push_back({name, {n_cols, n_rows}, kind, required});
}

void TensorSpecCollector::shaped(std::vector<float>&, const std::string& name,
                                 const std::vector<int64_t>& shape, TensorKind kind,
                                 bool required) {
  specs_.push_back({name, shape, kind, required});
}

void TensorSpecCollector::scale(float&, const std::string& name) {
  specs_.push_back({name, {1}, TensorKind::scale, false});
}

void TensorSpecCollector::without_effect(const std::string& name, int64_t n, TensorKind kind) {
  specs_.push_back({name, {n}, kind, false});
}

bool TensorSpecCollector::has(const std::string&, bool written) {
  return written;
}

int64_t TensorSpecCollector::rows_of(const std::string&, int64_t written) {
  return written;
}

std::string layer_tensor_name(int64_t layer, std::string_view what) {
  return strfmt("blk.%lld.", static_cast<long long>(layer)) + std::string(what);
}

std::string scale_name_of(std::string_view weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight_name.ends_with(kSuffix)) weight_name.remove_suffix(kSuffix.size());
  return std::string(weight_name) + ".scale";
}

}  // namespace cortiq
