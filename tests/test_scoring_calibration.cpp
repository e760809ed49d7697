// Confidence calibration: the reliability table and ECE, temperature
// fitting on synthetic distributions with a known answer, the compact rows
// the fit reads, and `cortiq calibrate --write` feeding generation's
// per-token confidence.
#include <gtest/gtest.h>

#include <cmath>

#include "base/random.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "kernels/cpu/log_softmax.hpp"
#include "runtime/sampler.hpp"
#include "scoring/calibration.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

// n positions over a vocabulary of v: logits z ~ N(0, spread), the true
// token drawn from softmax(z); the model's logits are z * scale (so the
// temperature that undoes it is `scale`).
std::vector<scoring::CalibrationRow> synthetic_rows(size_t n, size_t v, double spread, double scale,
                                                    size_t head) {
  NormalSampler normal(11);
  SplitMix64 bits(12);
  std::vector<scoring::CalibrationRow> rows;
  std::vector<float> z(v), model(v);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < v; ++j) z[j] = static_cast<float>(normal.next() * spread);
    const kernels::LogSoftmax truth = kernels::log_softmax(z);
    double u = bits.uniform(), cumulative = 0.0;
    TokenId target = static_cast<TokenId>(v - 1);
    for (size_t j = 0; j < v; ++j) {
      cumulative += std::exp(truth.log_prob(z[j]));
      if (u < cumulative) {
        target = static_cast<TokenId>(j);
        break;
      }
    }
    for (size_t j = 0; j < v; ++j) model[j] = static_cast<float>(z[j] * scale);
    rows.push_back(scoring::compress_row(model, kernels::log_softmax(model), target, head));
  }
  return rows;
}

TEST(Calibration, ReliabilityTableAndEce) {
  const std::vector<double> confidence = {0.05, 0.15, 0.95, 0.95, 1.0, 0.55};
  const std::vector<uint8_t> correct = {0, 0, 1, 0, 1, 1};
  std::array<scoring::ReliabilityBin, scoring::kReliabilityBins> bins;
  double ece = 0;
  scoring::reliability(confidence, correct, bins, ece);
  EXPECT_EQ(bins[0].count, 1);
  EXPECT_EQ(bins[1].count, 1);
  EXPECT_EQ(bins[5].count, 1);
  EXPECT_EQ(bins[9].count, 3);  // 1.0 falls in the last bin
  EXPECT_NEAR(bins[9].confidence, (0.95 + 0.95 + 1.0) / 3, 1e-15);
  EXPECT_NEAR(bins[9].accuracy, 2.0 / 3, 1e-15);
  const double expected =
      (0.05 + 0.15 + 0.45 + 3 * std::abs(2.0 / 3 - (0.95 + 0.95 + 1.0) / 3)) / 6;
  EXPECT_NEAR(ece, expected, 1e-15);
}

// Tokens drawn from the model's own distribution: calibrated (ECE ~ 0),
// and the fitted temperature is ~1.
TEST(Calibration, CalibratedModelHasNoErrorAndTemperatureOne) {
  const auto rows = synthetic_rows(20000, 40, 2.0, 1.0, 40);
  const scoring::CalibrationReport r = scoring::calibrate(rows);
  EXPECT_LT(r.ece, 0.015);
  EXPECT_NEAR(r.temperature, 1.0, 0.03);
  EXPECT_NEAR(r.accuracy, r.mean_confidence, 0.01);
}

// Logits scaled by 2.5 (overconfident) or 0.4 (underconfident): the fit
// recovers the scale, and the rescaled probabilities are calibrated.
TEST(Calibration, FittedTemperatureRecoversAKnownScale) {
  for (const double scale : {2.5, 0.4}) {
    const auto rows = synthetic_rows(20000, 40, 2.0, scale, 40);
    const scoring::CalibrationReport r = scoring::calibrate(rows);
    EXPECT_NEAR(r.temperature / scale, 1.0, 0.03) << scale;
    EXPECT_GT(r.ece, 0.05) << scale;
    EXPECT_LT(r.ece_fitted, 0.015) << scale;
    EXPECT_LT(r.nll_fitted, r.nll) << scale;
  }
}

// The compact row (exact head, binned tail) against the exact log-softmax
// of logits / T over a large vocabulary.
TEST(Calibration, CompactRowsKeepTheNllAtEveryTemperature) {
  const std::vector<float> logits = test::normal_values(9, 20000, 3.0);
  const TokenId target = 1234;
  const scoring::CalibrationRow row =
      scoring::compress_row(logits, kernels::log_softmax(logits), target);
  EXPECT_EQ(row.head.size(), scoring::kHeadLogits);
  for (const double t : {0.05, 0.3, 1.0, 2.0, 8.0, 20.0}) {
    std::vector<float> scaled(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) scaled[i] = static_cast<float>(logits[i] / t);
    const kernels::LogSoftmax exact = kernels::log_softmax(scaled);
    EXPECT_NEAR(row.nll(t), -exact.log_prob(scaled, target), 2e-4 * (1 + row.nll(t))) << t;
    EXPECT_NEAR(row.top_probability(t), std::exp(exact.log_prob(exact.max)), 1e-4) << t;
  }
}

// --write stores the temperature; a model loaded from the copy reports it,
// and generation's confidence is the token's probability at it.
TEST(Calibration, WrittenTemperatureDrivesGenerationConfidence) {
  test::TempDir dir;
  const std::string model = test::test_model_path({}).string();
  const std::string text = (dir / "text.txt").string();
  const std::string words = test::sample_text(20000);
  test::write_file_bytes(text, std::vector<uint8_t>(words.begin(), words.end()));
  const std::string out = (dir / "calibrated.gguf").string();
  std::string output;
  ASSERT_EQ(
      test::run_cli("calibrate -m " + model + " -f " + text + " -c 64 --chunks 6 --write " + out,
                    &output),
      0)
      << output;
  EXPECT_NE(output.find("Expected calibration error:"), std::string::npos) << output;
  const size_t at = output.find("Fitted temperature: ");
  ASSERT_NE(at, std::string::npos) << output;
  const double fitted = std::stod(output.substr(at + 20));
  const auto calibrated = Model::load(out);
  EXPECT_NEAR(calibrated->calibration_temperature(), fitted, 1e-4 * fitted);
  EXPECT_NE(calibrated->calibration_temperature(), 1.0);

  Session session(calibrated);
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = 1;
  options.ignore_eos = true;
  options.confidence = true;
  const std::vector<TokenId> prompt = {1, 20, 30};
  const GenerateResult result = session.generate(prompt, options);
  ASSERT_EQ(result.confidence.size(), 1u);
  Session plain(calibrated);
  const std::vector<float> logits = plain.evaluate(prompt);
  const auto n_vocab = static_cast<size_t>(calibrated->n_vocab());
  const auto last = std::span<const float>(logits).subspan(2 * n_vocab, n_vocab);
  EXPECT_FLOAT_EQ(result.confidence[0],
                  static_cast<float>(token_probability(last, result.tokens[0],
                                                       calibrated->calibration_temperature())));
  EXPECT_NE(result.confidence[0], static_cast<float>(token_probability(last, result.tokens[0])));
}

}  // namespace
}  // namespace cortiq
