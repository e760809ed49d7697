#include "model/blocks/classifier.hpp"

#include <algorithm>
#include <cmath>

#include "base/error.hpp"
#include "kernels/cpu/matmul.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void ClassifierHead::visit(TensorVisitor& v, const ModelHParams& hp) {
  const auto n_labels = std::max<int64_t>(1, static_cast<int64_t>(hp.classifier_labels.size()));
  v.matrix(weight, "cls.output.weight", hp.n_embd, n_labels, /*required=*/false);
}

std::vector<float> ClassifierHead::scores(std::span<const float> hidden, ThreadPool& pool) const {
  if (!present()) throw Error("the model has no classification head (cls.output.weight)");
  std::vector<float> out(static_cast<size_t>(weight.n_rows));
  kernels::MatmulScratch scratch;
  kernels::matmul(weight, hidden, 1, out, weight.n_rows, pool, scratch);
  if (softmax) {
    // As ggml_soft_max: max subtracted, sum in double.
    const float max = *std::max_element(out.begin(), out.end());
    double sum = 0;
    for (float& s : out) sum += (s = std::exp(s - max));
    for (float& s : out) s = static_cast<float>(s / sum);
  }
  return out;
}

}  // namespace cortiq
