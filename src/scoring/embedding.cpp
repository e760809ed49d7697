#include "scoring/embedding.hpp"

#include <cmath>

#include "base/error.hpp"

namespace cortiq::scoring {

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::mean;
  if (name == "last") return Pooling::last;
  if (name == "cls") return Pooling::cls;
  if (name == "rank") return Pooling::rank;
  return std::nullopt;
}

Pooling pooling_of_file(int32_t pooling_type) {
  switch (pooling_type) {
    case 2:
      return Pooling::cls;
    case 3:
      return Pooling::last;
    default:
      return Pooling::mean;  // 1 mean; none (0) and rank (4) give no vector
  }
}

std::vector<float> pool_embeddings(std::span<const float> hidden, size_t n_embd, Pooling pooling,
                                   bool normalize) {
  if (n_embd == 0 || hidden.size() < n_embd || hidden.size() % n_embd != 0) {
    throw Error("pool_embeddings: no rows, or rows of the wrong width");
  }
  const size_t n_rows = hidden.size() / n_embd;
  std::vector<double> sum(n_embd, 0.0);
  switch (pooling) {
    case Pooling::mean:
      for (size_t r = 0; r < n_rows; ++r) {
        for (size_t i = 0; i < n_embd; ++i) sum[i] += hidden[r * n_embd + i];
      }
      for (double& v : sum) v /= static_cast<double>(n_rows);
      break;
    case Pooling::last:
    case Pooling::rank:
    case Pooling::cls: {
      const size_t r = pooling == Pooling::cls ? 0 : n_rows - 1;
      for (size_t i = 0; i < n_embd; ++i) sum[i] = hidden[r * n_embd + i];
      break;
    }
  }
  double scale = 1.0;
  if (normalize) {
    double norm2 = 0.0;
    for (const double v : sum) norm2 += v * v;
    if (norm2 > 0) scale = 1.0 / std::sqrt(norm2);
  }
  std::vector<float> out(n_embd);
  for (size_t i = 0; i < n_embd; ++i) out[i] = static_cast<float>(sum[i] * scale);
  return out;
}

}  // namespace cortiq::scoring
