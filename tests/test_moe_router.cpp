// The mixture-of-experts router (blocks/moe.hpp) against llama.cpp's
// build_moe_ffn: the gating, the top-k choice and its ties, the weights'
// renormalization with its clamp, the scale; and the loader's checks of a
// MoE file's expert counts.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <vector>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "gguf_test_files.hpp"
#include "model/blocks/moe.hpp"
#include "model/family.hpp"
#include "model/gen_model/random_model.hpp"
#include "model/hparams.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route_row(std::vector<float> scores, const RouterSpec& spec, size_t k) {
  Routed r{std::vector<int32_t>(k), std::vector<float>(k)};
  route(scores, spec, r.experts, r.weights);
  return r;
}

// Softmax over every expert, then the k best, best first; weights are the
// probabilities themselves (not renormalized) unless asked.
TEST(MoeRouter, SoftmaxChoosesTheBestAndKeepsTheirProbabilities) {
  const std::vector<float> scores = {0.5f, 2.0f, -1.0f, 1.0f};
  double sum = 0;
  for (const float s : scores) sum += std::exp(static_cast<double>(s) - 2.0);
  const Routed r = route_row(scores, {}, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(r.weights[0], 1.0 / sum, 1e-7);
  EXPECT_NEAR(r.weights[1], std::exp(-1.0) / sum, 1e-7);

  const Routed n = route_row(scores, {.normalize = true}, 2);
  EXPECT_EQ(n.experts, r.experts);
  EXPECT_FLOAT_EQ(n.weights[0] + n.weights[1], 1.0f);
  EXPECT_FLOAT_EQ(n.weights[0], r.weights[0] / (r.weights[0] + r.weights[1]));
}

// Llama 4: the raw scores choose (llama.cpp's selection_probs = logits),
// the sigmoid weighs. Saturated sigmoids tie in float where the logits do
// not: 20 and 21 both give 1.0f, and the logits pick expert 1.
TEST(MoeRouter, Llama4SelectsByTheLogitsAndWeighsBySigmoid) {
  const std::vector<float> scores = {20.0f, 21.0f, 0.0f, -3.0f};
  const RouterSpec sigmoid{.gating = RouterGating::sigmoid};
  EXPECT_EQ(route_row(scores, sigmoid, 1).experts, (std::vector<int32_t>{0}));
  RouterSpec llama4 = sigmoid;
  llama4.select_by_scores = true;
  const Routed r = route_row(scores, llama4, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(r.weights, (std::vector<float>{1.0f, 1.0f}));
  const Routed low = route_row({-1.0f, 0.5f, 2.0f, 0.0f}, llama4, 2);
  EXPECT_EQ(low.experts, (std::vector<int32_t>{2, 1}));
  EXPECT_FLOAT_EQ(low.weights[0], 1.0f / (1.0f + std::exp(-2.0f)));
  EXPECT_FLOAT_EQ(low.weights[1], 1.0f / (1.0f + std::exp(-0.5f)));
}

// Equal scores: the lower expert index first (ggml's argsort for up to 16
// experts), whatever their position in the row.
TEST(MoeRouter, TiesGoToTheLowerExpert) {
  EXPECT_EQ(route_row({1.0f, 3.0f, 3.0f, 3.0f}, {}, 2).experts, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(route_row({7.0f, 7.0f, 7.0f, 7.0f, 7.0f}, {}, 3).experts,
            (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(route_row({0.0f, 2.0f, 0.0f, 2.0f}, {.gating = RouterGating::sigmoid}, 4).experts,
            (std::vector<int32_t>{1, 3, 0, 2}));
}

// Sigmoid gating scores each expert alone; the renormalization divides by
// the chosen weights' sum, clamped below at 2^-14 (llama.cpp's ggml_clamp
// at the smallest normal fp16), and the scale multiplies after it.
TEST(MoeRouter, SigmoidClampedSumAndScale) {
  const Routed s = route_row({0.0f, -2.0f, 3.0f}, {.gating = RouterGating::sigmoid}, 2);
  EXPECT_EQ(s.experts, (std::vector<int32_t>{2, 0}));
  EXPECT_FLOAT_EQ(s.weights[0], 1.0f / (1.0f + std::exp(-3.0f)));
  EXPECT_FLOAT_EQ(s.weights[1], 0.5f);

  // Two experts far below the rest: their probabilities sum to less than
  // the clamp, so they are divided by the clamp, not by their sum.
  const Routed tiny =
      route_row({-40.0f, -40.0f}, {.gating = RouterGating::sigmoid, .normalize = true}, 2);
  const float p = 1.0f / (1.0f + std::exp(40.0f));
  EXPECT_FLOAT_EQ(tiny.weights[0], p / kRouterMinWeightSum);
  EXPECT_LT(tiny.weights[0] + tiny.weights[1], 1e-6f);

  const Routed scaled = route_row({1.0f, 0.0f}, {.normalize = true, .scale = 2.5f}, 1);
  EXPECT_FLOAT_EQ(scaled.weights[0], 2.5f);
  const Routed unscaled = route_row({1.0f, 0.0f}, {.normalize = true, .scale = 1.0f}, 1);
  EXPECT_FLOAT_EQ(unscaled.weights[0], 1.0f);
}

// DeepSeek V3's correction bias picks the experts but does not weigh them.
TEST(MoeRouter, SelectionBiasChoosesButDoesNotWeigh) {
  const std::vector<float> scores = {2.0f, 1.0f, 0.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.5f, 0.9f};
  Routed r{std::vector<int32_t>(2), std::vector<float>(2)};
  std::vector<float> row = scores;
  route(row, {.gating = RouterGating::sigmoid}, r.experts, r.weights, bias);
  // sigmoid: 0.881, 0.731, 0.5, 0.269; biased: 0.881, 0.731, 1.0, 1.169.
  EXPECT_EQ(r.experts, (std::vector<int32_t>{3, 2}));
  EXPECT_FLOAT_EQ(r.weights[0], 1.0f / (1.0f + std::exp(1.0f)));
  EXPECT_FLOAT_EQ(r.weights[1], 0.5f);
}

// Grouped top-k: groups ranked by the sum of their two best scores; only
// the best n_groups_used groups' experts compete, whatever the rest score.
TEST(MoeRouter, GroupedTopKKeepsTheBestGroups) {
  // Three groups of three. Group 0 has the single best expert (5) but a
  // weak second (-5): sum 0; group 1: 2 + 2 = 4; group 2: 1.5 + 1 = 2.5.
  const std::vector<float> scores = {5.0f, -5.0f, -6.0f, 2.0f, 2.0f, -1.0f, 1.5f, 1.0f, 0.0f};
  const RouterSpec grouped{.gating = RouterGating::sigmoid, .n_groups = 3, .n_groups_used = 2};
  EXPECT_EQ(route_row(scores, grouped, 3).experts, (std::vector<int32_t>{3, 4, 6}));
  // Without groups the best expert wins.
  EXPECT_EQ(route_row(scores, {.gating = RouterGating::sigmoid}, 3).experts,
            (std::vector<int32_t>{0, 3, 4}));
  // More experts than the kept groups hold: the masked ones come last, in
  // index order, with their own (unbiased) weights.
  const Routed all =
      route_row(scores, {.gating = RouterGating::sigmoid, .n_groups = 3, .n_groups_used = 1}, 4);
  EXPECT_EQ(all.experts, (std::vector<int32_t>{3, 4, 5, 0}));
  EXPECT_FLOAT_EQ(all.weights[3], 1.0f / (1.0f + std::exp(-5.0f)));
}

// GPT-OSS: the raw scores choose, a softmax over the chosen ones weighs.
TEST(MoeRouter, SoftmaxWeightGatingWeighsOnlyTheChosen) {
  const Routed r =
      route_row({1.0f, 3.0f, -2.0f, 2.0f}, {.gating = RouterGating::softmax_weight}, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 3}));
  const double e = std::exp(-1.0);
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + e), 1e-7);
  EXPECT_NEAR(r.weights[1], e / (1.0 + e), 1e-7);
  EXPECT_FLOAT_EQ(r.weights[0] + r.weights[1], 1.0f);
}

// -inf scores get weight 0; a row of -inf only is defined (no NaN).
TEST(MoeRouter, MinusInfinityScoresWeighNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  const Routed some = route_row({-inf, 1.0f, -inf, 0.0f}, {.normalize = true}, 3);
  EXPECT_EQ(some.experts, (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(some.weights[2], 0.0f);
  EXPECT_FLOAT_EQ(some.weights[0] + some.weights[1], 1.0f);
  for (const RouterGating gating :
       {RouterGating::softmax, RouterGating::sigmoid, RouterGating::softmax_weight}) {
    const Routed none = route_row({-inf, -inf, -inf}, {.gating = gating, .normalize = true}, 2);
    EXPECT_EQ(none.experts, (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(none.weights, (std::vector<float>{0.0f, 0.0f}));
  }
}

// A one-layer gen-model file of `arch` (four experts, two per token).
void write_small_moe(std::string_view arch, int64_t kv_heads, const std::filesystem::path& path) {
  RandomModelOptions o;
  o.family = find_family(arch);
  o.geometry.n_embd = 64;
  o.geometry.n_layer = 1;
  o.geometry.n_head = 4;
  o.geometry.n_head_kv = kv_heads;
  o.geometry.n_ff = 96;
  write_random_model(o, path);
}

// The error loading a copy of `from` with its metadata edited ("" when it loads).
std::string load_error_with(const std::filesystem::path& from, const std::filesystem::path& to,
                            const std::function<void(gguf::GgufWriter&)>& edit) {
  test::rewrite_metadata(from, to, edit);
  try {
    Model::load(to, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A MoE file states its expert counts: missing, zero, or more used than
// there are, each refused naming the key.
TEST(MoeRouter, ExpertCountsAreChecked) {
  test::TempDir dir;
  write_small_moe("qwen3moe", 2, dir / "a.gguf");
  const auto error_with = [&](const std::function<void(gguf::GgufWriter&)>& edit) {
    return load_error_with(dir / "a.gguf", dir / "b.gguf", edit);
  };
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.remove("qwen3moe.expert_count");
            }).find("expert_count"),
            std::string::npos);
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.set("qwen3moe.expert_used_count", gguf::Value(uint32_t{5}));
            }).find("expert_used_count 5 of expert_count 4"),
            std::string::npos);
  // Four experts in the tensors, eight in the metadata: the shape names the tensor.
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.set("qwen3moe.expert_count", gguf::Value(uint32_t{8}));
            }).find("blk.0.ffn_gate_inp.weight"),
            std::string::npos);
  // Grouped routing is read, and checked, for every family with experts.
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.set("qwen3moe.expert_group_count", gguf::Value(uint32_t{3}));
              w.set("qwen3moe.expert_group_used_count", gguf::Value(uint32_t{1}));
            }).find("expert_group_count must divide expert_count"),
            std::string::npos);
  EXPECT_EQ(error_with([](gguf::GgufWriter& w) {
              w.set("qwen3moe.expert_group_count", gguf::Value(uint32_t{2}));
              w.set("qwen3moe.expert_group_used_count", gguf::Value(uint32_t{1}));
            }),
            "");
  EXPECT_EQ(ModelHParams::from_gguf(gguf::GgufFile::open(dir / "b.gguf")).router.n_groups, 2);
  EXPECT_EQ(error_with([](gguf::GgufWriter&) {}), "");
}

// deepseek2's routing comes from its keys (gating, renormalization, scale,
// groups), each checked as llama.cpp checks it; what Cortiq does not run
// yet is refused naming the key.
TEST(MoeRouter, DeepSeekRoutingKeysAreReadAndChecked) {
  test::TempDir dir;
  write_small_moe("deepseek2", 4, dir / "a.gguf");
  const RouterSpec& r = ModelHParams::from_gguf(gguf::GgufFile::open(dir / "a.gguf")).router;
  EXPECT_EQ(r.gating, RouterGating::sigmoid);
  EXPECT_TRUE(r.normalize);
  EXPECT_EQ(r.scale, 2.5f);
  EXPECT_EQ(r.n_groups, 2);
  EXPECT_EQ(r.n_groups_used, 1);
  const auto error_with = [&](const std::function<void(gguf::GgufWriter&)>& edit) {
    return load_error_with(dir / "a.gguf", dir / "b.gguf", edit);
  };
  // V2 files carry no gating key: softmax.
  test::rewrite_metadata(dir / "a.gguf", dir / "v2.gguf",
                         [](gguf::GgufWriter& w) { w.remove("deepseek2.expert_gating_func"); });
  EXPECT_EQ(ModelHParams::from_gguf(gguf::GgufFile::open(dir / "v2.gguf")).router.gating,
            RouterGating::softmax);
  const auto u32 = [](uint32_t v) { return gguf::Value(v); };
  EXPECT_NE(error_with([&](gguf::GgufWriter& w) {
              w.set("deepseek2.expert_gating_func", u32(4));
            }).find("expert_gating_func 4"),
            std::string::npos);
  EXPECT_NE(error_with([&](gguf::GgufWriter& w) {
              w.set("deepseek2.expert_group_used_count", u32(2));
            }).find("expert_group_used_count"),
            std::string::npos);
  EXPECT_NE(error_with([&](gguf::GgufWriter& w) {
              w.set("deepseek2.expert_group_count", u32(3));
            }).find("expert_group_count"),
            std::string::npos);
  EXPECT_NE(error_with([&](gguf::GgufWriter& w) {
              w.set("deepseek2.nextn_predict_layers", u32(1));
            }).find("deepseek2.nextn_predict_layers"),
            std::string::npos);
  // Mistral Large 3's temperature steps every temperature_length positions.
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.set("deepseek2.attention.temperature_scale", gguf::Value(0.1f));
            }).find("temperature_length > 0"),
            std::string::npos);
  EXPECT_EQ(error_with([](gguf::GgufWriter& w) {
              w.set("deepseek2.attention.temperature_scale", gguf::Value(0.1f));
              w.set("deepseek2.attention.temperature_length", gguf::Value(uint32_t{16}));
            }),
            "");
  EXPECT_NE(error_with([](gguf::GgufWriter& w) {
              w.remove("deepseek2.attention.value_length_mla");
            }).find("value_length_mla"),
            std::string::npos);
  EXPECT_EQ(error_with([](gguf::GgufWriter&) {}), "");
}

// llama.cpp's saved models store an unspecified pooling type (-1) as the
// u32 0xFFFFFFFF: it reads as absent, not as out of range.
TEST(MoeRouter, UnspecifiedPoolingTypeOfSavedFilesIsAbsent) {
  test::TempDir dir;
  write_small_moe("olmoe", 4, dir / "a.gguf");  // OLMoE's K norm spans n_embd
  test::rewrite_metadata(dir / "a.gguf", dir / "b.gguf", [](gguf::GgufWriter& w) {
    w.set("olmoe.pooling_type", gguf::Value(uint32_t{0xFFFFFFFFu}));
  });
  const gguf::GgufFile saved = gguf::GgufFile::open(dir / "b.gguf");
  EXPECT_EQ(ModelHParams::from_gguf(saved).pooling_type, -1);
  EXPECT_EQ(ModelHParams::from_gguf(saved).n_expert, 4);
}

}  // namespace
}  // namespace cortiq
