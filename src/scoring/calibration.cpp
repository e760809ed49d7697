#include "scoring/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::scoring {

namespace {

// log sum exp(l / T) over the row, from the head and the tail bins, with
// the maximum factored out.
double log_sum_exp(const CalibrationRow& row, double beta) {
  const double max = row.head.front();
  double sum = 0.0;
  for (const float l : row.head) sum += std::exp(beta * (l - max));
  for (int b = 0; b < kTailBins; ++b) {
    if (row.tail_count[b] > 0) sum += row.tail_count[b] * std::exp(beta * (row.tail_mean[b] - max));
  }
  return beta * max + std::log(sum);
}

}  // namespace

double CalibrationRow::nll(double temperature) const {
  const double beta = 1.0 / temperature;
  return log_sum_exp(*this, beta) - beta * target_logit;
}

double CalibrationRow::top_probability(double temperature) const {
  const double beta = 1.0 / temperature;
  return std::exp(beta * head.front() - log_sum_exp(*this, beta));
}

CalibrationRow compress_row(std::span<const float> logits, const kernels::LogSoftmax& stats,
                            TokenId target, size_t head) {
  CalibrationRow row;
  row.target_logit = logits[static_cast<size_t>(target)];
  row.correct = stats.argmax == target;
  row.confidence = std::exp(stats.log_prob(stats.max));
  std::vector<float> sorted(logits.begin(), logits.end());
  head = std::min(head, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(head),
                    sorted.end(), std::greater<>());
  row.head.assign(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(head));
  if (head == sorted.size()) return row;
  // The tail: equal-width bins between its smallest and largest logit
  // (-inf entries carry no probability at any temperature and are dropped).
  float lo = INFINITY, hi = -INFINITY;
  for (size_t i = head; i < sorted.size(); ++i) {
    if (sorted[i] == -INFINITY) continue;
    lo = std::min(lo, sorted[i]);
    hi = std::max(hi, sorted[i]);
  }
  if (lo > hi) return row;
  std::array<double, kTailBins> sums{};
  const double width = (static_cast<double>(hi) - lo) / kTailBins;
  for (size_t i = head; i < sorted.size(); ++i) {
    if (sorted[i] == -INFINITY) continue;
    const int b =
        width > 0 ? std::min(kTailBins - 1, static_cast<int>((sorted[i] - lo) / width)) : 0;
    sums[b] += sorted[i];
    ++row.tail_count[b];
  }
  for (int b = 0; b < kTailBins; ++b) {
    if (row.tail_count[b] > 0) row.tail_mean[b] = static_cast<float>(sums[b] / row.tail_count[b]);
  }
  return row;
}

void reliability(std::span<const double> confidence, std::span<const uint8_t> correct,
                 std::array<ReliabilityBin, kReliabilityBins>& bins, double& ece) {
  bins = {};
  for (size_t i = 0; i < confidence.size(); ++i) {
    const int b =
        std::clamp(static_cast<int>(confidence[i] * kReliabilityBins), 0, kReliabilityBins - 1);
    ++bins[b].count;
    bins[b].confidence += confidence[i];
    bins[b].accuracy += correct[i] != 0 ? 1.0 : 0.0;
  }
  ece = 0.0;
  const auto n = static_cast<double>(confidence.size());
  for (ReliabilityBin& bin : bins) {
    if (bin.count == 0) continue;
    bin.confidence /= static_cast<double>(bin.count);
    bin.accuracy /= static_cast<double>(bin.count);
    ece += static_cast<double>(bin.count) / n * std::abs(bin.accuracy - bin.confidence);
  }
}

double fit_temperature(std::span<const CalibrationRow> rows) {
  if (rows.empty()) throw Error("fit_temperature: no positions");
  auto mean_nll = [&](double log_t) {
    double sum = 0.0;
    for (const CalibrationRow& r : rows) sum += r.nll(std::exp(log_t));
    return sum / static_cast<double>(rows.size());
  };
  const double golden = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = std::log(0.05), b = std::log(20.0);
  double c = b - golden * (b - a), d = a + golden * (b - a);
  double fc = mean_nll(c), fd = mean_nll(d);
  while (b - a > 1e-6) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - golden * (b - a);
      fc = mean_nll(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + golden * (b - a);
      fd = mean_nll(d);
    }
  }
  return std::exp((a + b) / 2);
}

CalibrationReport calibrate(std::span<const CalibrationRow> rows) {
  CalibrationReport r;
  r.count = static_cast<int64_t>(rows.size());
  if (rows.empty()) throw Error("calibrate: no positions");
  std::vector<double> confidence;
  std::vector<uint8_t> correct;
  for (const CalibrationRow& row : rows) {
    confidence.push_back(row.confidence);
    correct.push_back(row.correct ? 1 : 0);
    r.accuracy += row.correct ? 1.0 : 0.0;
    r.mean_confidence += row.confidence;
    r.nll += row.nll(1.0);
  }
  const auto n = static_cast<double>(rows.size());
  r.accuracy /= n;
  r.mean_confidence /= n;
  r.nll /= n;
  reliability(confidence, correct, r.bins, r.ece);
  r.temperature = fit_temperature(rows);
  std::vector<double> fitted;
  for (const CalibrationRow& row : rows) {
    fitted.push_back(row.top_probability(r.temperature));
    r.nll_fitted += row.nll(r.temperature);
  }
  r.nll_fitted /= n;
  std::array<ReliabilityBin, kReliabilityBins> unused;
  reliability(fitted, correct, unused, r.ece_fitted);
  return r;
}

std::string format_calibration_report(const CalibrationReport& r) {
  std::string out =
      strfmt("%lld positions, top-1 accuracy %.2f %%, mean confidence %.2f %%\n\n",
             static_cast<long long>(r.count), 100 * r.accuracy, 100 * r.mean_confidence);
  out += "confidence      positions   mean conf.   accuracy      gap\n";
  for (int b = 0; b < kReliabilityBins; ++b) {
    const ReliabilityBin& bin = r.bins[b];
    out += strfmt("[%.1f, %.1f%c  %10lld", b / 10.0, (b + 1) / 10.0,
                  b + 1 == kReliabilityBins ? ']' : ')', static_cast<long long>(bin.count));
    if (bin.count > 0) {
      out += strfmt("   %9.4f   %9.4f   %+8.4f\n", bin.confidence, bin.accuracy,
                    bin.accuracy - bin.confidence);
    } else {
      out += "           -           -          -\n";
    }
  }
  out += strfmt("\nExpected calibration error: %.4f\n", r.ece);
  out +=
      strfmt("Fitted temperature: %.4f (mean NLL %.4f at T = 1, %.4f at T = %.4f; ECE then %.4f)\n",
             r.temperature, r.nll, r.nll_fitted, r.temperature, r.ece_fitted);
  return out;
}

}  // namespace cortiq::scoring
