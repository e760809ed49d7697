#include "scoring/kl_divergence.hpp"

#include <algorithm>
#include <cmath>

#include "base/strings.hpp"

namespace cortiq::scoring {

KlPosition compare_position(std::span<const float> logits, const kernels::LogSoftmax& row,
                            const LogProbRow& base, TokenId token) {
  KlPosition p;
  const auto tok = static_cast<size_t>(token);
  p.nll = -row.log_prob(logits[tok]);
  p.nll_base = -static_cast<double>(base.log_prob(tok));
  // KL(base || model) over the tokens the baseline gives log p > -16 (the
  // rest were clamped when it was saved).
  double kld = 0.0;
  size_t base_top = 0;
  float base_top_log_prob = base.log_prob(0);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float log_base = base.log_prob(i);
    if (log_base > base_top_log_prob) {
      base_top_log_prob = log_base;
      base_top = i;
    }
    if (log_base > -16.0f) {
      kld += std::exp(static_cast<double>(log_base)) * (log_base - row.log_prob(logits[i]));
    }
  }
  p.kld = kld;
  p.same_top = static_cast<size_t>(row.argmax) == base_top;
  p.p_diff = std::exp(-p.nll) - std::exp(-p.nll_base);
  return p;
}

void KlStats::add(const KlPosition& p) {
  nll_.add(p.nll);
  nll_base_.add(p.nll_base);
  sum_nll_nll_base_ += p.nll * p.nll_base;
  sum_kld_ += p.kld;
  sum_kld2_ += p.kld * p.kld;
  sum_p_diff_ += p.p_diff;
  const double d2 = p.p_diff * p.p_diff;
  sum_p_diff2_ += d2;
  sum_p_diff4_ += d2 * d2;
  same_top_ += p.same_top ? 1 : 0;
  kld_.push_back(p.kld);
  p_diff_.push_back(p.p_diff);
}

namespace {

Estimate mean_and_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const auto n = static_cast<double>(count);
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  return {mean, var > 0 && count > 10 ? std::sqrt(var / (n - 1)) : 0.0};
}

double covariance(double sum_a, double sum_b, double sum_ab, int64_t count) {
  if (count < 10) return 0.0;
  const auto n = static_cast<double>(count);
  return (sum_ab / n - (sum_a / n) * (sum_b / n)) / (n - 1);
}

// Linear interpolation between the sorted values around fraction * (n - 1).
double percentile(const std::vector<double>& sorted, double fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  double p = fraction * static_cast<double>(sorted.size() - 1);
  const auto i = static_cast<size_t>(p);
  p -= static_cast<double>(i);
  return (1 - p) * sorted[i] + p * sorted[std::min(i + 1, sorted.size() - 1)];
}

double median(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

}  // namespace

KlSummary KlStats::summary() const {
  KlSummary s;
  s.count = count();
  if (s.count == 0) return s;
  const Estimate log_ppl = mean_and_error(nll_.sum, nll_.sum2, s.count);
  const Estimate log_base = mean_and_error(nll_base_.sum, nll_base_.sum2, s.count);
  s.ppl = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.error};
  s.ppl_base = {std::exp(log_base.value), std::exp(log_base.value) * log_base.error};
  const double cov = covariance(nll_.sum, nll_base_.sum, sum_nll_nll_base_, s.count);
  const double errors = log_ppl.error * log_base.error;
  s.ppl_correlation = errors > 0 ? cov / errors : 0.0;
  s.log_ppl_ratio.value = log_ppl.value - log_base.value;
  s.log_ppl_ratio.error = std::sqrt(
      std::max(0.0, log_ppl.error * log_ppl.error + log_base.error * log_base.error - 2.0 * cov));
  s.ppl_ratio.value = std::exp(s.log_ppl_ratio.value);
  s.ppl_ratio.error = s.ppl_ratio.value * s.log_ppl_ratio.error;
  s.ppl_diff.value = s.ppl.value - s.ppl_base.value;
  s.ppl_diff.error =
      std::sqrt(std::max(0.0, s.ppl.error * s.ppl.error + s.ppl_base.error * s.ppl_base.error -
                                  2.0 * s.ppl.value * s.ppl_base.value * cov));
  s.kld = mean_and_error(sum_kld_, sum_kld2_, s.count);
  std::vector<double> kld = kld_;
  std::sort(kld.begin(), kld.end());
  s.kld_max = kld.back();
  s.kld_99_9 = percentile(kld, 0.999);
  s.kld_99 = percentile(kld, 0.99);
  s.kld_95 = percentile(kld, 0.95);
  s.kld_90 = percentile(kld, 0.90);
  s.kld_median = median(kld);
  s.kld_10 = percentile(kld, 0.10);
  s.kld_5 = percentile(kld, 0.05);
  s.kld_1 = percentile(kld, 0.01);
  s.kld_0_1 = percentile(kld, 0.001);
  s.kld_min = kld.front();
  s.p_diff = mean_and_error(sum_p_diff_, sum_p_diff2_, s.count);
  std::vector<double> dp = p_diff_;
  std::sort(dp.begin(), dp.end());
  s.p_diff_max = dp.back();
  s.p_diff_99_9 = percentile(dp, 0.999);
  s.p_diff_99 = percentile(dp, 0.99);
  s.p_diff_95 = percentile(dp, 0.95);
  s.p_diff_90 = percentile(dp, 0.90);
  s.p_diff_75 = percentile(dp, 0.75);
  s.p_diff_median = median(dp);
  s.p_diff_25 = percentile(dp, 0.25);
  s.p_diff_10 = percentile(dp, 0.10);
  s.p_diff_5 = percentile(dp, 0.05);
  s.p_diff_1 = percentile(dp, 0.01);
  s.p_diff_0_1 = percentile(dp, 0.001);
  s.p_diff_min = dp.front();
  const Estimate mse = mean_and_error(sum_p_diff2_, sum_p_diff4_, s.count);
  s.p_diff_rms.value = std::sqrt(mse.value);
  s.p_diff_rms.error = s.p_diff_rms.value > 0 ? 0.5 / s.p_diff_rms.value * mse.error : 0.0;
  const double top = static_cast<double>(same_top_) / static_cast<double>(s.count);
  s.same_top = {top,
                s.count > 1 ? std::sqrt(top * (1 - top) / static_cast<double>(s.count - 1)) : 0.0};
  return s;
}

std::string format_kl_report(const KlSummary& s) {
  std::string out;
  out += strfmt("====== Perplexity statistics ======\n");
  out += strfmt("Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.ppl.value, s.ppl.error);
  out += strfmt("Mean PPL(base)                : %10.6f ± %10.6f\n", s.ppl_base.value,
                s.ppl_base.error);
  out += strfmt("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * s.ppl_correlation);
  out += strfmt("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.log_ppl_ratio.value,
                s.log_ppl_ratio.error);
  out += strfmt("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.ppl_ratio.value,
                s.ppl_ratio.error);
  out += strfmt("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", s.ppl_diff.value,
                s.ppl_diff.error);
  out += strfmt("====== KL divergence statistics ======\n");
  out += strfmt("Mean    KLD: %10.6f ± %10.6f\n", s.kld.value, s.kld.error);
  out += strfmt("Maximum KLD: %10.6f\n", s.kld_max);
  out += strfmt("99.9%%   KLD: %10.6f\n", s.kld_99_9);
  out += strfmt("99.0%%   KLD: %10.6f\n", s.kld_99);
  out += strfmt("95.0%%   KLD: %10.6f\n", s.kld_95);
  out += strfmt("90.0%%   KLD: %10.6f\n", s.kld_90);
  out += strfmt("Median  KLD: %10.6f\n", s.kld_median);
  out += strfmt("10.0%%   KLD: %10.6f\n", s.kld_10);
  out += strfmt(" 5.0%%   KLD: %10.6f\n", s.kld_5);
  out += strfmt(" 1.0%%   KLD: %10.6f\n", s.kld_1);
  out += strfmt(" 0.1%%   KLD: %10.6f\n", s.kld_0_1);
  out += strfmt("Minimum KLD: %10.6f\n\n", s.kld_min);
  out += strfmt("====== Token probability statistics ======\n");
  out += strfmt("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * s.p_diff.value, 100.0 * s.p_diff.error);
  out += strfmt("Maximum Δp: %6.3f%%\n", 100.0 * s.p_diff_max);
  out += strfmt("99.9%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_99_9);
  out += strfmt("99.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_99);
  out += strfmt("95.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_95);
  out += strfmt("90.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_90);
  out += strfmt("75.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_75);
  out += strfmt("Median  Δp: %6.3f%%\n", 100.0 * s.p_diff_median);
  out += strfmt("25.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_25);
  out += strfmt("10.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_10);
  out += strfmt(" 5.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_5);
  out += strfmt(" 1.0%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_1);
  out += strfmt(" 0.1%%   Δp: %6.3f%%\n", 100.0 * s.p_diff_0_1);
  out += strfmt("Minimum Δp: %6.3f%%\n", 100.0 * s.p_diff_min);
  out += strfmt("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s.p_diff_rms.value,
                100.0 * s.p_diff_rms.error);
  out +=
      strfmt("Same top p: %6.3f ± %5.3f %%\n", 100.0 * s.same_top.value, 100.0 * s.same_top.error);
  return out;
}

}  // namespace cortiq::scoring
