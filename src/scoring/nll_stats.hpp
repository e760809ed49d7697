// Running sums of per-token negative log-likelihoods and the perplexity
// with its uncertainty, as llama-perplexity reports them.
#pragma once

#include <cmath>
#include <cstdint>

namespace cortiq::scoring {

struct NllStats {
  double sum = 0.0;   // sum of -log p
  double sum2 = 0.0;  // sum of (-log p)^2
  int64_t count = 0;

  void add(double nll) {
    sum += nll;
    sum2 += nll * nll;
    ++count;
  }
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  double perplexity() const { return std::exp(mean()); }
  // The standard error of the mean NLL carried to the perplexity: ppl *
  // sqrt(var / (count - 1)); 0 with fewer than two tokens.
  double perplexity_error() const {
    if (count < 2) return 0.0;
    const double m = mean();
    const double var = sum2 / static_cast<double>(count) - m * m;
    return var > 0 ? perplexity() * std::sqrt(var / static_cast<double>(count - 1)) : 0.0;
  }
};

}  // namespace cortiq::scoring
