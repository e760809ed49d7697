// How far a model's next-token distributions drift from a baseline's saved
// log-probabilities (log_prob_file.hpp): KL divergence, top-1 agreement,
// the change of the right token's probability (Δp), and both perplexities —
// the statistics llama-perplexity --kl-divergence reports, computed the
// same way (KL summed over the baseline tokens with log p > -16).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/log_softmax.hpp"
#include "scoring/log_prob_file.hpp"
#include "scoring/nll_stats.hpp"

namespace cortiq::scoring {

// One position compared with the baseline.
struct KlPosition {
  double kld = 0.0;       // KL(base || model)
  double nll = 0.0;       // -log p_model(token)
  double nll_base = 0.0;  // -log p_base(token)
  double p_diff = 0.0;    // p_model(token) - p_base(token)
  bool same_top = false;  // both argmaxes agree
};

KlPosition compare_position(std::span<const float> logits, const kernels::LogSoftmax& row,
                            const LogProbRow& base, TokenId token);

// A mean with the standard error of the mean (0 for 10 values or fewer,
// as the peer).
struct Estimate {
  double value = 0.0;
  double error = 0.0;
};

// A point of a sorted distribution: its label in the report and where it
// sits (0 the minimum, 0.5 the median, 1 the maximum).
struct Quantile {
  const char* label;
  double fraction;
  double value = 0.0;
};

struct KlSummary {
  int64_t count = 0;
  Estimate ppl, ppl_base, log_ppl_ratio, ppl_ratio, ppl_diff;
  double ppl_correlation = 0.0;
  Estimate kld;
  std::vector<Quantile> kld_quantiles;  // the peer's: maximum, 99.9 % ... 0.1 %, minimum
  Estimate p_diff;                      // mean Δp
  std::vector<Quantile> p_diff_quantiles;
  Estimate p_diff_rms;
  Estimate same_top;  // fraction of positions whose argmax agrees
};

class KlStats {
 public:
  void add(const KlPosition& p);
  int64_t count() const { return static_cast<int64_t>(kld_.size()); }
  // The means and their errors (what the per-chunk table shows); the
  // quantiles are left empty: they sort every value.
  KlSummary running() const;
  // running() and the quantiles: the final report.
  KlSummary summary() const;

 private:
  NllStats nll_, nll_base_;
  double sum_nll_nll_base_ = 0.0;
  double sum_kld_ = 0.0, sum_kld2_ = 0.0;
  double sum_p_diff_ = 0.0, sum_p_diff2_ = 0.0, sum_p_diff4_ = 0.0;
  int64_t same_top_ = 0;
  std::vector<double> kld_, p_diff_;
};

// The final report, in the peer's layout.
std::string format_kl_report(const KlSummary& s);

}  // namespace cortiq::scoring
