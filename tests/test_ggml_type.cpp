// The weight-type table: ids, names, block geometry, and the refusal of
// types the engine cannot compute with.
#include "base/error.hpp"
#include "quant/ggml_type.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

TEST(GgmlType, IdsNamesAndGeometryAgree) {
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* t = ggml_type_traits(id);
    if (t == nullptr) continue;
    ++known;
    EXPECT_EQ(static_cast<uint32_t>(t->type), id);
    EXPECT_EQ(ggml_type_from_name(t->name), t->type) << t->name;
    EXPECT_GT(t->block_elems, 0u);
    EXPECT_GT(t->block_bytes, 0u);
    if (t->quantizable) {
      EXPECT_TRUE(t->dequantizable) << t->name << " can be written but not read";
    }
  }
  EXPECT_EQ(known, 35) << "every type the GGUF format defines";
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u}) {
    EXPECT_EQ(ggml_type_traits(removed), nullptr) << removed;
  }
  EXPECT_EQ(ggml_type_from_name("q4_k"), GgmlType::Q4_K);
  EXPECT_EQ(ggml_type_from_name("Q4_K_M"), std::nullopt) << "a recipe, not a type";
}

TEST(GgmlType, RowBytes) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, 10), 40u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), 288u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::MXFP4, 32), 17u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 100), std::nullopt) << "not a whole block";
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, UINT64_MAX / 2), std::nullopt) << "overflow";
}

TEST(GgmlType, UnsupportedTypeIsRefusedByName) {
  EXPECT_NO_THROW(require_supported_weight_type(GgmlType::IQ4_XS, "blk.0.ffn_up.weight"));
  try {
    require_supported_weight_type(GgmlType::IQ2_XXS, "blk.3.attn_q.weight");
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unsupported weight type IQ2_XXS in tensor blk.3.attn_q.weight");
  }
  EXPECT_FALSE(can_dequantize(GgmlType::TQ1_0));
  EXPECT_FALSE(can_quantize(GgmlType::IQ4_XS)) << "read-only type";
}

}  // namespace
}  // namespace cortiq
