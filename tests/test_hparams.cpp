// Hyper-parameters from GGUF keys, with the peer's defaults, and the KV cache's
// bookkeeping of sequences and cells.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <span>
#include <vector>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "kv/kv_cache.hpp"
#include "model/hparams.hpp"
#include "model/rope_setup.hpp"

namespace cortiq {
namespace {

struct KeySet {
  std::vector<std::pair<std::string, gguf::Value>> keys;
  KeySet& set(std::string key, gguf::Value v) {
    keys.emplace_back(std::move(key), std::move(v));
    return *this;
  }
};

KeySet llama_keys() {
  KeySet k;
  k.set("general.architecture", std::string("llama"))
      .set("llama.embedding_length", uint32_t{256})
      .set("llama.block_count", uint32_t{2})
      .set("llama.attention.head_count", uint32_t{8})
      .set("llama.attention.head_count_kv", uint32_t{2})
      .set("llama.feed_forward_length", uint32_t{512})
      .set("llama.context_length", uint32_t{8192})
      .set("llama.vocab_size", uint32_t{100});
  return k;
}

ModelHParams parse(const KeySet& k) {
  gguf::GgufWriter w;
  for (const auto& [key, value] : k.keys) w.set(key, value);
  w.begin_in_memory();
  static std::vector<std::byte> bytes;  // the parsed file views it
  bytes = w.finish_in_memory();
  return ModelHParams::from_gguf(gguf::GgufFile::parse(bytes, "test.gguf"));
}

TEST(HParams, DefaultsFollowThePeer) {
  const auto hp = parse(llama_keys());
  EXPECT_EQ(hp.head_dim_k, 32);
  EXPECT_EQ(hp.head_dim_v, 32);
  EXPECT_EQ(hp.rope.n_dims, 32);
  EXPECT_FALSE(hp.rope.neox);
  EXPECT_FLOAT_EQ(hp.rope.freq_base, 10000.0f);
  EXPECT_FLOAT_EQ(hp.rope.freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_EQ(hp.rope.n_ctx_orig, 8192);
  EXPECT_FLOAT_EQ(hp.kq_scale(), 1.0f / std::sqrt(32.0f));
}

TEST(HParams, ZeroScalingFactorMeansNoScaling) {
  auto k = llama_keys();
  k.set("llama.rope.scaling.factor", 0.0f);
  EXPECT_FLOAT_EQ(parse(k).rope.freq_scale, 1.0f);
  auto lin = llama_keys();
  lin.set("llama.rope.scaling.type", std::string("linear")).set("llama.rope.scaling.factor", 4.0f);
  EXPECT_FLOAT_EQ(parse(lin).rope.freq_scale, 0.25f);
}

TEST(HParams, YarnResolvesExtAndAttnFactors) {
  auto k = llama_keys();
  k.set("llama.rope.scaling.type", std::string("yarn"))
      .set("llama.rope.scaling.factor", 4.0f)
      .set("llama.rope.scaling.original_context_length", uint32_t{2048});
  const auto hp = parse(k);
  EXPECT_FLOAT_EQ(hp.rope.freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(hp.rope.ext_factor, 1.0f);
  EXPECT_EQ(hp.rope.n_ctx_orig, 2048);
  // mscale(4) = 1 + 0.1 ln 4, cancelled by the same factor rope_yarn applies.
  EXPECT_NEAR(hp.rope.attn_factor, 1.0f, 1e-6);
}

// llama.cpp's loader reads rope.scaling.yarn_beta_fast / _slow /
// _ext_factor / _attn_factor / _log_multiplier for a few families only
// (grok, mistral3, deepseek2): a llama file's are ignored, as they are there.
TEST(HParams, YarnTuningKeysAreReadOnlyWhereLlamaCppReadsThem) {
  auto k = llama_keys();
  k.set("llama.rope.scaling.type", std::string("yarn"))
      .set("llama.rope.scaling.factor", 4.0f)
      .set("llama.rope.scaling.yarn_beta_fast", 16.0f)
      .set("llama.rope.scaling.yarn_beta_slow", 2.0f)
      .set("llama.rope.scaling.yarn_ext_factor", 0.0f)
      .set("llama.rope.scaling.yarn_log_multiplier", 0.1f);
  const auto hp = parse(k);
  EXPECT_FLOAT_EQ(hp.rope.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(hp.rope.beta_slow, 1.0f);
  EXPECT_FLOAT_EQ(hp.rope.ext_factor, 1.0f);
  EXPECT_NEAR(hp.rope.attn_factor, 1.0f, 1e-6);  // no log multiplier
  KeySet m;
  for (auto [key, value] : k.keys) {
    if (key == "general.architecture") value = gguf::Value(std::string("mistral3"));
    if (key.starts_with("llama.")) key = "mistral3." + key.substr(6);
    m.set(key, value);
  }
  m.set("mistral3.attention.layer_norm_rms_epsilon", 1e-5f);
  const auto mistral = parse(m);
  EXPECT_FLOAT_EQ(mistral.rope.beta_fast, 16.0f);
  EXPECT_FLOAT_EQ(mistral.rope.beta_slow, 2.0f);
  EXPECT_FLOAT_EQ(mistral.rope.ext_factor, 1.0f);  // mistral3 reads no ext_factor
  // Its log multiplier: mscale(4, 1) / mscale(4, 0.1) / (1 + 0.1 ln 4).
  const float m1 = 1.0f + 0.1f * std::log(4.0f), m01 = 1.0f + 0.01f * std::log(4.0f);
  EXPECT_NEAR(mistral.rope.attn_factor, m1 / m01 / m1, 1e-6);
}

TEST(HParams, QwenUsesNeoxPairsAndExplicitHeadSizes) {
  KeySet k;
  k.set("general.architecture", std::string("qwen3"))
      .set("qwen3.embedding_length", uint32_t{1024})
      .set("qwen3.block_count", uint32_t{2})
      .set("qwen3.attention.head_count", uint32_t{16})
      .set("qwen3.attention.head_count_kv", uint32_t{8})
      .set("qwen3.attention.key_length", uint32_t{128})
      .set("qwen3.attention.value_length", uint32_t{128})
      .set("qwen3.feed_forward_length", uint32_t{3072})
      .set("qwen3.context_length", uint32_t{40960})
      .set("qwen3.rope.freq_base", 1000000.0f);
  const auto hp = parse(k);
  EXPECT_TRUE(hp.rope.neox);
  EXPECT_EQ(hp.head_dim_k, 128);
  EXPECT_EQ(hp.q_width(), 2048);
  EXPECT_EQ(hp.rope.n_dims, 128);
}

TEST(HParams, InvalidValuesAreNamed) {
  auto k = llama_keys();
  k.set("llama.attention.head_count_kv", uint32_t{3});
  EXPECT_THROW(parse(k), Error);
  auto missing = llama_keys();
  missing.keys.erase(missing.keys.begin() + 2);  // block_count
  try {
    parse(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama.block_count"), std::string::npos) << e.what();
  }
  auto odd = llama_keys();
  odd.set("llama.rope.dimension_count", uint32_t{31});
  EXPECT_THROW(parse(odd), Error);
  auto scaling = llama_keys();
  scaling.set("llama.rope.scaling.type", std::string("bogus"));
  EXPECT_THROW(parse(scaling), Error);
}

// Hugging Face's llama3 rope: wavelengths shorter than orig/high_freq_factor
// keep their frequency, longer than orig/low_freq_factor divide it by the
// factor, and the band between interpolates.
TEST(HParams, Llama3FrequencyFactors) {
  RopeHParams rope;
  rope.freq_base = 500000.0f;
  rope.scaling_factor = 32.0f;
  rope.n_ctx_orig = 8192;
  rope.llama3_low_freq_factor = 1.0f;
  rope.llama3_high_freq_factor = 4.0f;
  const auto f = llama3_freq_factors(rope, 64);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f.front(), 1.0f);
  EXPECT_FLOAT_EQ(f.back(), 32.0f);
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi * std::pow(500000.0, 2.0 * i / 64);
    if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(f[i], 32.0f);
    }
    if (wavelen < 2048.0) {
      EXPECT_FLOAT_EQ(f[i], 1.0f);
    }
  }
}

TEST(KvCacheCells, SequencesShareBlocksAndGiveThemBack) {
  // 10 positions in blocks of 2: 5 blocks.
  KvCache cache(KvCacheShape::uniform(1, 4, 4, 10, 3, KvType::f32, 2));
  const std::vector<TokenId> tokens = {1, 2, 3, 4, 5, 6};
  const auto first = [&](size_t n) { return std::span<const TokenId>(tokens).first(n); };
  cache.append(0, first(4));
  cache.append(1, first(3));
  EXPECT_EQ(cache.n_free_blocks(), 1);
  EXPECT_EQ(cache.blocks_needed(1, 1), 0);         // room left in its last block
  EXPECT_THROW(cache.append(2, first(4)), Error);  // needs 2 blocks, 1 free: nothing changes
  EXPECT_EQ(cache.length(2), 0);
  EXPECT_EQ(cache.n_free_blocks(), 1);
  cache.truncate(0, 1);
  EXPECT_EQ(cache.length(0), 1);
  EXPECT_EQ(cache.n_free_blocks(), 2);
  const auto cells = cache.append(2, first(4));
  EXPECT_EQ(cells.size(), 4u);
  EXPECT_EQ(cache.n_free_blocks(), 0);
  EXPECT_EQ(cache.n_used_blocks(), 5);
  EXPECT_THROW(cache.length(3), Error);
  cache.clear_all();
  EXPECT_EQ(cache.n_free_blocks(), 5);
}

TEST(KvCacheCells, F16StorageRoundsAndF32KeepsBits) {
  for (const KvType type : {KvType::f32, KvType::f16}) {
    KvCache cache(KvCacheShape::uniform(2, 2, 3, 4, 1, type));
    const TokenId token[] = {0};
    const auto cell = cache.append(0, token)[0];
    const float k[] = {1.0f / 3, -2.5f};
    cache.store_k(1, cell, k);
    const auto view = cache.keys(1, 0);
    ASSERT_EQ(view.cells.size(), 1u);
    EXPECT_EQ(view.f16, type == KvType::f16);
    EXPECT_EQ(view.row_bytes, type == KvType::f16 ? 4u : 8u);
  }
}

}  // namespace
}  // namespace cortiq
