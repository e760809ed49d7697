// Confidence calibration: does the model's top-1 probability match how
// often its top-1 token is right? Per scored position (the chunks of
// chunks.hpp): the argmax against the true next token and the argmax's
// probability. Reported as a reliability table of 10 equal-width confidence
// bins, the expected calibration error
//
//   ECE = sum over bins of (n_bin / n) * |accuracy_bin - mean confidence_bin|
//
// and the temperature T that minimises the mean NLL of the true tokens
// under softmax(logits / T) (temperature scaling). The fit reads a compact
// copy of each row: the largest logits exactly and the rest in a histogram
// (their mean per bin), enough for log-sum-exp at any T in the searched
// range [0.05, 20] (see CalibrationRow).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/log_softmax.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::scoring {

inline constexpr int kReliabilityBins = 10;
inline constexpr int kTailBins = 64;
inline constexpr size_t kHeadLogits = 256;

// One scored position, compressed for the temperature fit.
struct CalibrationRow {
  float target_logit = 0.0f;
  bool correct = false;                      // argmax == target
  double confidence = 0.0;                   // the argmax's probability at T = 1 (exact)
  std::vector<float> head;                   // the largest logits, descending (head[0] = max)
  std::array<float, kTailBins> tail_mean{};  // the other logits: mean per bin
  std::array<uint32_t, kTailBins> tail_count{};

  // -log p(target) and the argmax's probability under softmax(logits / T),
  // from the compact copy.
  double nll(double temperature) const;
  double top_probability(double temperature) const;
};

CalibrationRow compress_row(std::span<const float> logits, const kernels::LogSoftmax& row,
                            TokenId target, size_t head = kHeadLogits);

struct ReliabilityBin {
  int64_t count = 0;
  double confidence = 0.0;  // mean top-1 probability
  double accuracy = 0.0;    // fraction right
};

struct CalibrationReport {
  int64_t count = 0;
  double accuracy = 0.0;
  double mean_confidence = 0.0;
  std::array<ReliabilityBin, kReliabilityBins> bins{};
  double ece = 0.0;
  double temperature = 1.0;  // the NLL-minimising one
  double nll = 0.0;          // mean NLL at T = 1 (from the compact rows)
  double nll_fitted = 0.0;   // ... at the fitted temperature
  double ece_fitted = 0.0;   // ECE of the probabilities at the fitted temperature
};

// The reliability table and ECE of (confidence, correct) pairs.
void reliability(std::span<const double> confidence, std::span<const uint8_t> correct,
                 std::array<ReliabilityBin, kReliabilityBins>& bins, double& ece);

// The temperature in [0.05, 20] minimising the mean NLL (golden-section
// search on log T; NLL(1/T) is convex).
double fit_temperature(std::span<const CalibrationRow> rows);

CalibrationReport calibrate(std::span<const CalibrationRow> rows);

std::string format_calibration_report(const CalibrationReport& r);

}  // namespace cortiq::scoring
