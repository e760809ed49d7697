#include "quant/quant_recipe.hpp"

#include <gtest/gtest.h>

#include <map>

#include "model/family.hpp"
#include "model/gen_model/arch_spec.hpp"

namespace cortiq {
namespace {

// name -> chosen type for a llama-shaped model (untouched tensors omitted).
std::map<std::string, GgmlType> plan(std::string_view recipe_name, bool pure, int64_t n_layer,
                                     int64_t n_head_kv = 2, bool tied = false,
                                     int64_t n_embd = 256) {
  ModelGeometry g;
  g.n_vocab = 1000;
  g.n_embd = n_embd;
  g.n_layer = n_layer;
  g.n_head = 8;
  g.n_head_kv = n_head_kv;
  g.n_ff = 512;
  g.tied = tied;
  std::vector<TensorDesc> descs;
  for (const TensorSpec& s : model_spec(*find_family("llama"), g).tensors) {
    descs.push_back({s.name, s.shape});
  }
  const ModelShape shape{static_cast<uint32_t>(n_layer), 8, static_cast<uint32_t>(n_head_kv), 0};
  const QuantRecipe* recipe = find_quant_recipe(recipe_name);
  EXPECT_NE(recipe, nullptr) << recipe_name;
  const std::vector<TensorTypeChoice> choices = choose_tensor_types(*recipe, pure, shape, descs);
  std::map<std::string, GgmlType> out;
  for (size_t i = 0; i < descs.size(); ++i) {
    if (choices[i].quantize) out[descs[i].name] = choices[i].type;
  }
  return out;
}

std::string layer(int i, std::string_view what) {
  return "blk." + std::to_string(i) + "." + std::string(what);
}

TEST(QuantRecipe, FindsRecipesAndAliases) {
  ASSERT_NE(find_quant_recipe("q4_k_m"), nullptr);
  EXPECT_EQ(find_quant_recipe("q4_k_m")->file_type, 15u);
  EXPECT_EQ(find_quant_recipe("Q4_K")->name, "Q4_K_M");
  EXPECT_EQ(find_quant_recipe("Q5_K")->name, "Q5_K_M");
  EXPECT_EQ(find_quant_recipe("Q3_K")->name, "Q3_K_M");
  EXPECT_EQ(find_quant_recipe("Q4_0")->file_type, 2u);
  EXPECT_EQ(find_quant_recipe("Q8_0")->file_type, 7u);
  EXPECT_EQ(find_quant_recipe("F16")->file_type, 1u);
  EXPECT_EQ(find_quant_recipe("BF16")->file_type, 32u);
  EXPECT_EQ(find_quant_recipe("Q6_K")->file_type, 18u);
  EXPECT_EQ(find_quant_recipe("Q2_K")->file_type, 10u);
  EXPECT_EQ(find_quant_recipe("nope"), nullptr);
  EXPECT_EQ(find_quant_recipe("IQ2_XXS"), nullptr);  // needs an importance matrix; not offered
  for (const QuantRecipe& r : quant_recipes()) {
    EXPECT_TRUE(can_quantize(r.default_type)) << r.name;
    EXPECT_EQ(find_quant_recipe(r.name), &r);
  }
}

TEST(QuantRecipe, EveryQuantizableTypeHasARecipe) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* t = ggml_type_traits(id);
    if (t == nullptr || !can_quantize(t->type)) continue;
    const QuantRecipe* r = find_quant_recipe(t->name);
    ASSERT_NE(r, nullptr) << t->name;
    EXPECT_EQ(r->default_type, t->type);
  }
}

TEST(QuantRecipe, UniformFileTypes) {
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::F32), 0u);
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::F16), 1u);
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::Q4_0), 2u);
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::Q8_0), 7u);
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::Q4_K), 14u);
  EXPECT_EQ(file_type_for_uniform_type(GgmlType::BF16), 32u);
}

TEST(QuantRecipe, TensorRoles) {
  EXPECT_EQ(tensor_role("output.weight"), TensorRole::output);
  EXPECT_EQ(tensor_role("token_embd.weight"), TensorRole::token_embd);
  EXPECT_EQ(tensor_role("blk.3.attn_v.weight"), TensorRole::attn_v);
  EXPECT_EQ(tensor_role("blk.3.attn_qkv.weight"), TensorRole::attn_v);
  EXPECT_EQ(tensor_role("blk.3.attn_k.weight"), TensorRole::attn_k);
  EXPECT_EQ(tensor_role("blk.3.attn_q.weight"), TensorRole::attn_q);
  EXPECT_EQ(tensor_role("blk.3.attn_output.weight"), TensorRole::attn_output);
  EXPECT_EQ(tensor_role("blk.3.ffn_down.weight"), TensorRole::ffn_down);
  EXPECT_EQ(tensor_role("blk.3.ffn_up.weight"), TensorRole::ffn_up);
  EXPECT_EQ(tensor_role("blk.3.ffn_gate.weight"), TensorRole::ffn_gate);
  EXPECT_EQ(tensor_role("blk.3.attn_norm.weight"), TensorRole::other);
}

TEST(QuantRecipe, OnlyMultiDimensionalWeightsAreQuantizable) {
  const std::vector<int64_t> matrix{256, 256}, vector{256}, column{256, 1};
  EXPECT_TRUE(tensor_is_quantizable("blk.0.attn_q.weight", matrix));
  EXPECT_TRUE(
      tensor_is_quantizable("blk.0.ffn_down_exps.weight", std::vector<int64_t>{256, 256, 8}));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_norm.weight", vector));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q.bias", vector));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q.weight", column));  // 1-D in ggml's eyes
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q.bias", matrix));    // not a weight
  EXPECT_FALSE(tensor_is_quantizable("blk.0.ffn_gate_inp.weight", matrix));
  EXPECT_FALSE(tensor_is_quantizable("blk.0.attn_q_norm.weight", matrix));
  EXPECT_FALSE(tensor_is_quantizable("token_types.weight", matrix));
}

TEST(QuantRecipe, FallbackForRowsThatDoNotFitTheBlock) {
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 512), GgmlType::Q4_K);
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 96), GgmlType::Q5_0);
  EXPECT_EQ(fallback_type(GgmlType::Q5_K, 96), GgmlType::Q5_1);
  EXPECT_EQ(fallback_type(GgmlType::Q6_K, 96), GgmlType::Q8_0);
  EXPECT_EQ(fallback_type(GgmlType::Q2_K, 96), GgmlType::Q4_0);
  EXPECT_EQ(fallback_type(GgmlType::Q3_K, 96), GgmlType::Q4_0);
  EXPECT_EQ(fallback_type(GgmlType::Q4_K, 100), GgmlType::F16);  // not even 32 fits
  EXPECT_EQ(fallback_type(GgmlType::Q8_0, 100), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::IQ4_NL, 48), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::F16, 7), GgmlType::F16);
  EXPECT_EQ(fallback_type(GgmlType::F32, 7), GgmlType::F32);
}

TEST(QuantRecipe, Q4KMGivesMoreBitsOnUseMoreBitsLayers) {
  const auto types = plan("Q4_K_M", false, 8);
  EXPECT_EQ(types.at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q4_K);
  EXPECT_FALSE(types.contains("output_norm.weight"));
  EXPECT_FALSE(types.contains("blk.0.attn_norm.weight"));
  // use_more_bits(i, 8): the first and last eighth and every third layer between.
  for (int i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    const GgmlType expected = more ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(types.at(layer(i, "attn_v.weight")), expected) << i;
    EXPECT_EQ(types.at(layer(i, "ffn_down.weight")), expected) << i;
    EXPECT_EQ(types.at(layer(i, "attn_q.weight")), GgmlType::Q4_K);
    EXPECT_EQ(types.at(layer(i, "attn_k.weight")), GgmlType::Q4_K);
    EXPECT_EQ(types.at(layer(i, "attn_output.weight")), GgmlType::Q4_K);
    EXPECT_EQ(types.at(layer(i, "ffn_gate.weight")), GgmlType::Q4_K);
    EXPECT_EQ(types.at(layer(i, "ffn_up.weight")), GgmlType::Q4_K);
  }
}

TEST(QuantRecipe, TiedEmbeddingIsTreatedAsOutput) {
  const auto types = plan("Q4_K_M", false, 2, 2, /*tied=*/true);
  EXPECT_FALSE(types.contains("output.weight"));
  EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q6_K);
}

TEST(QuantRecipe, Q2KDependsOnGqa) {
  const auto gqa4 = plan("Q2_K", false, 4, /*n_head_kv=*/2);  // 8 / 2 = 4
  EXPECT_EQ(gqa4.at(layer(1, "attn_v.weight")), GgmlType::Q4_K);
  EXPECT_EQ(gqa4.at(layer(1, "ffn_down.weight")), GgmlType::Q3_K);
  EXPECT_EQ(gqa4.at(layer(1, "attn_output.weight")), GgmlType::Q3_K);
  EXPECT_EQ(gqa4.at(layer(1, "attn_q.weight")), GgmlType::Q2_K);
  EXPECT_EQ(gqa4.at("output.weight"), GgmlType::Q6_K);
  const auto gqa2 = plan("Q2_K", false, 4, /*n_head_kv=*/4);
  EXPECT_EQ(gqa2.at(layer(1, "attn_v.weight")), GgmlType::Q3_K);
}

TEST(QuantRecipe, SmallKRecipes) {
  const auto s = plan("Q4_K_S", false, 16);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(s.at(layer(i, "attn_v.weight")), i < 4 ? GgmlType::Q5_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(s.at(layer(i, "ffn_down.weight")), i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << i;
  }
  const auto m3 = plan("Q3_K_M", false, 16);
  EXPECT_EQ(m3.at(layer(0, "attn_v.weight")), GgmlType::Q5_K);
  EXPECT_EQ(m3.at(layer(1, "attn_v.weight")), GgmlType::Q5_K);
  EXPECT_EQ(m3.at(layer(2, "attn_v.weight")), GgmlType::Q4_K);
  EXPECT_EQ(m3.at(layer(0, "ffn_down.weight")), GgmlType::Q5_K);  // i < 16/16
  EXPECT_EQ(m3.at(layer(1, "ffn_down.weight")), GgmlType::Q4_K);
  EXPECT_EQ(m3.at(layer(5, "attn_output.weight")), GgmlType::Q4_K);
  EXPECT_EQ(m3.at(layer(5, "ffn_up.weight")), GgmlType::Q3_K);
  EXPECT_EQ(plan("Q5_K_S", false, 4).at(layer(0, "attn_v.weight")), GgmlType::Q5_K);
  EXPECT_EQ(plan("Q6_K", false, 4).at("output.weight"), GgmlType::Q6_K);
}

TEST(QuantRecipe, LegacyRecipesStillRaiseTheOutput) {
  EXPECT_EQ(plan("Q4_0", false, 2).at("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(plan("Q4_0", false, 2).at(layer(0, "attn_v.weight")), GgmlType::Q4_0);
  EXPECT_EQ(plan("Q8_0", false, 2).at("output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(plan("MXFP4", false, 2).at("output.weight"), GgmlType::Q8_0);
  EXPECT_EQ(plan("MXFP4", false, 2).at(layer(0, "ffn_down.weight")), GgmlType::MXFP4);
  // An output row that is not a whole number of the default's blocks: Q8_0,
  // which at 48 columns does not fit either, so F16.
  EXPECT_EQ(plan("Q4_0", false, 2, 2, false, /*n_embd=*/48).at("output.weight"), GgmlType::F16);
}

TEST(QuantRecipe, FloatRecipesHaveNoMixture) {
  for (const auto& [name, type] : plan("F16", false, 4)) EXPECT_EQ(type, GgmlType::F16) << name;
  for (const auto& [name, type] : plan("BF16", false, 4)) EXPECT_EQ(type, GgmlType::BF16) << name;
}

TEST(QuantRecipe, PureGivesEveryMatrixTheSameType) {
  for (const auto& [name, type] : plan("Q4_K_M", true, 8)) EXPECT_EQ(type, GgmlType::Q4_K) << name;
  for (const auto& [name, type] : plan("Q5_0", true, 2)) EXPECT_EQ(type, GgmlType::Q5_0) << name;
  // ...but rows the type cannot hold still fall back (96 = 3 blocks of 32).
  const auto odd = plan("Q4_K", true, 2, 2, false, /*n_embd=*/96);
  EXPECT_EQ(odd.at(layer(0, "attn_q.weight")), GgmlType::Q5_0);
  EXPECT_EQ(odd.at(layer(0, "ffn_down.weight")), GgmlType::Q4_K);  // row = n_ff = 512
}

}  // namespace
}  // namespace cortiq
