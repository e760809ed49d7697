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

// The quantiles the peer reports, in its order; at 0.5 the interpolation
// is its median (the mean of the middle two of an even count).
std::vector<Quantile> quantiles(std::vector<double> values, bool quartiles) {
  std::sort(values.begin(), values.end());
  std::vector<Quantile> out = {
      {"Maximum", 1.0}, {"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95}, {"90.0%", 0.90}};
  if (quartiles) out.push_back({"75.0%", 0.75});
  out.push_back({"Median", 0.5});
  if (quartiles) out.push_back({"25.0%", 0.25});
  for (const Quantile q :
       {Quantile{"10.0%", 0.10}, Quantile{" 5.0%", 0.05}, Quantile{" 1.0%", 0.01},
        Quantile{" 0.1%", 0.001}, Quantile{"Minimum", 0.0}}) {
    out.push_back(q);
  }
  for (Quantile& q : out) q.value = percentile(values, q.fraction);
  return out;
}

}  // namespace

KlSummary KlStats::summary() const {
  KlSummary s = running();
  if (s.count == 0) return s;
  s.kld_quantiles = quantiles(kld_, false);
  s.p_diff_quantiles = quantiles(p_diff_, true);
  return s;
}

KlSummary KlStats::running() const {
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
  s.p_diff = mean_and_error(sum_p_diff_, sum_p_diff2_, s.count);
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
  for (const Quantile& q : s.kld_quantiles) {
    out += strfmt("%-7s KLD: %10.6f\n", q.label, q.value);
  }
  out += "\n";
  out += strfmt("====== Token probability statistics ======\n");
  out += strfmt("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * s.p_diff.value, 100.0 * s.p_diff.error);
  for (const Quantile& q : s.p_diff_quantiles) {
    out += strfmt("%-7s Δp: %6.3f%%\n", q.label, 100.0 * q.value);
  }
  out += strfmt("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * s.p_diff_rms.value,
                100.0 * s.p_diff_rms.error);
  out +=
      strfmt("Same top p: %6.3f ± %5.3f %%\n", 100.0 * s.same_top.value, 100.0 * s.same_top.error);
  return out;
}

}  // namespace cortiq::scoring
