#include "model/family.hpp"
#include "model/gen_model/random_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/gen_model/builtin_vocab.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

ModelGeometry small_geometry() {
  ModelGeometry g;
  g.n_embd = 64;
  g.n_layer = 2;
  g.n_head = 4;
  g.n_head_kv = 2;
  g.n_ff = 96;
  g.n_ctx = 128;
  return g;
}

std::vector<std::string> names_of(const std::vector<TensorSpec>& specs) {
  std::vector<std::string> names;
  for (const TensorSpec& s : specs) names.push_back(s.name);
  return names;
}

const TensorSpec& spec_named(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (const TensorSpec& s : specs) {
    if (s.name == name) return s;
  }
  throw std::runtime_error("no tensor " + std::string(name));
}

TEST(ArchSpec, LlamaTensorList) {
  ModelGeometry g = small_geometry();
  g.n_vocab = 500;
  const std::vector<TensorSpec> specs = model_spec(*find_family("llama"), g).tensors;
  const std::vector<std::string> expected_layer = {
      "attn_norm.weight", "attn_q.weight",      "attn_k.weight",
      "attn_v.weight",    "attn_output.weight", "ffn_norm.weight",
      "ffn_gate.weight",  "ffn_up.weight",      "ffn_down.weight"};
  std::vector<std::string> expected = {"token_embd.weight", "output_norm.weight", "output.weight"};
  for (int i = 0; i < 2; ++i) {
    for (const std::string& t : expected_layer)
      expected.push_back("blk." + std::to_string(i) + "." + t);
  }
  EXPECT_EQ(names_of(specs), expected);
  EXPECT_EQ(spec_named(specs, "token_embd.weight").shape, (std::vector<int64_t>{64, 500}));
  EXPECT_EQ(spec_named(specs, "output.weight").shape, (std::vector<int64_t>{64, 500}));
  EXPECT_EQ(spec_named(specs, "blk.1.attn_q.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(spec_named(specs, "blk.1.attn_k.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(spec_named(specs, "blk.1.attn_v.weight").shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(spec_named(specs, "blk.1.attn_output.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(spec_named(specs, "blk.1.ffn_gate.weight").shape, (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(spec_named(specs, "blk.1.ffn_down.weight").shape, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(spec_named(specs, "blk.1.ffn_norm.weight").kind, TensorKind::norm);

  g.tied = true;
  const std::vector<TensorSpec> tied = model_spec(*find_family("llama"), g).tensors;
  EXPECT_EQ(tied.size(), specs.size() - 1);
  for (const TensorSpec& s : tied) EXPECT_NE(s.name, "output.weight");
}

TEST(ArchSpec, Qwen2AddsQkvBiases) {
  ModelGeometry g = small_geometry();
  g.n_vocab = 500;
  const std::vector<TensorSpec> specs = model_spec(*find_family("qwen2"), g).tensors;
  EXPECT_EQ(specs.size(), 3u + 2 * 12);
  EXPECT_EQ(spec_named(specs, "blk.0.attn_q.bias").shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_k.bias").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_v.bias").kind, TensorKind::bias);
  g.head_dim = 32;  // 4 * 32 != 64: qwen2 cannot express it
  EXPECT_THROW(model_spec(*find_family("qwen2"), g).tensors, Error);
}

TEST(ArchSpec, Qwen3AddsPerHeadNormsAndExplicitHeadDim) {
  ModelGeometry g = small_geometry();
  g.n_vocab = 500;
  g.head_dim = 32;  // q is 4 * 32 = 128 wide, more than n_embd
  const Family& qwen3 = *find_family("qwen3");
  const std::vector<TensorSpec> specs = model_spec(qwen3, g).tensors;
  EXPECT_EQ(specs.size(), 3u + 2 * 11);
  EXPECT_EQ(spec_named(specs, "blk.0.attn_q_norm.weight").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_k_norm.weight").shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_q.weight").shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_k.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(spec_named(specs, "blk.0.attn_output.weight").shape, (std::vector<int64_t>{128, 64}));
  bool has_key_length = false;
  for (const gguf::KeyValue& kv : model_spec(qwen3, g).metadata) {
    if (kv.key == "qwen3.attention.key_length") {
      has_key_length = true;
      EXPECT_EQ(kv.value.as_uint(), 32u);
    }
  }
  EXPECT_TRUE(has_key_length);
}

TEST(ArchSpec, RejectsImpossibleGeometry) {
  const Family& llama = *find_family("llama");
  ModelGeometry g = small_geometry();
  g.n_vocab = 10;
  g.n_head_kv = 3;  // 4 heads do not group by 3
  EXPECT_THROW(validate_geometry(llama, g), Error);
  g = small_geometry();
  g.n_vocab = 10;
  g.n_embd = 66;  // not a multiple of 4 heads
  EXPECT_THROW(validate_geometry(llama, g), Error);
  g.head_dim = 16;  // stated explicitly: fine for llama
  EXPECT_NO_THROW(validate_geometry(llama, g));
  EXPECT_EQ(find_family("no-such-architecture"), nullptr);
}

TEST(BuiltinVocab, HasSpecialByteAndWordPieces) {
  const Vocabulary v = builtin_spm_vocab();
  ASSERT_EQ(v.tokens.size(), builtin_vocab_size());
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[2], "</s>");
  EXPECT_EQ(v.types[1], TokenType::control);
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.tokens[3 + 0x0A], "<0x0A>");
  EXPECT_EQ(v.tokens[258], "<0xFF>");
  for (int i = 3; i < 259; ++i) EXPECT_EQ(v.types[i], TokenType::byte);
  const auto has = [&](std::string_view piece) {
    return std::find(v.tokens.begin(), v.tokens.end(), piece) != v.tokens.end();
  };
  EXPECT_TRUE(has("\xE2\x96\x81"));     // ▁
  EXPECT_TRUE(has("\xE2\x96\x81h"));    // ▁h
  EXPECT_TRUE(has("\xE2\x96\x81hi"));   // ▁hi
  EXPECT_TRUE(has("\xE2\x96\x81hel"));  // every prefix of ▁hello
  EXPECT_TRUE(has("\xE2\x96\x81hello"));
  EXPECT_EQ(v.scores.size(), v.tokens.size());
}

TEST(BuiltinVocab, PadsAndRefusesTooSmall) {
  const size_t natural = builtin_vocab_size();
  const Vocabulary v = builtin_spm_vocab(static_cast<int64_t>(natural) + 5);
  EXPECT_EQ(v.tokens.size(), natural + 5);
  EXPECT_EQ(v.tokens.back(), "<unused_4>");
  EXPECT_EQ(v.types.back(), TokenType::unused);
  EXPECT_THROW(builtin_spm_vocab(100), Error);
}

TEST(RandomModel, SeedsAreIndependentOfOrderAndDistinct) {
  EXPECT_EQ(tensor_seed(1, "blk.0.attn_q.weight"), tensor_seed(1, "blk.0.attn_q.weight"));
  EXPECT_NE(tensor_seed(1, "blk.0.attn_q.weight"), tensor_seed(2, "blk.0.attn_q.weight"));
  EXPECT_NE(tensor_seed(1, "blk.0.attn_q.weight"), tensor_seed(1, "blk.0.attn_k.weight"));
  const TensorSpec a{"blk.0.attn_q.weight", {64, 64}, TensorKind::matrix};
  const TensorSpec b{"blk.0.attn_k.weight", {64, 64}, TensorKind::matrix};
  EXPECT_EQ(random_tensor_values(a, 7), random_tensor_values(a, 7));
  EXPECT_NE(random_tensor_values(a, 7), random_tensor_values(b, 7));
  EXPECT_NE(random_tensor_values(a, 7), random_tensor_values(a, 8));
}

TEST(RandomModel, Distributions) {
  const auto moments = [](const std::vector<float>& v) {
    double sum = 0, sum2 = 0;
    for (const float x : v) sum += x, sum2 += double{x} * x;
    const double mean = sum / v.size();
    return std::pair{mean, std::sqrt(sum2 / v.size() - mean * mean)};
  };
  const auto [m_mean, m_std] =
      moments(random_tensor_values({"m", {256, 512}, TensorKind::matrix}, 3));
  EXPECT_NEAR(m_mean, 0.0, 0.002);
  EXPECT_NEAR(m_std, 1.0 / 16.0, 0.001);  // 1/sqrt(256)
  const auto [n_mean, n_std] = moments(random_tensor_values({"n", {4096}, TensorKind::norm}, 3));
  EXPECT_NEAR(n_mean, 1.0, 0.002);
  EXPECT_NEAR(n_std, kRandomNormStd, 0.002);
  const auto [b_mean, b_std] = moments(random_tensor_values({"b", {4096}, TensorKind::bias}, 3));
  EXPECT_NEAR(b_mean, 0.0, 0.002);
  EXPECT_NEAR(b_std, kRandomBiasStd, 0.002);
}

RandomModelOptions options_for(std::string_view arch, GgmlType type = GgmlType::F32,
                               uint64_t seed = 1) {
  RandomModelOptions o;
  o.family = find_family(arch);
  o.geometry = small_geometry();
  o.weight_type = type;
  o.seed = seed;
  return o;
}

TEST(RandomModel, SameOptionsGiveIdenticalBytes) {
  test::TempDir dir;
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    write_random_model(options_for(arch, GgmlType::Q8_0), dir / "a.gguf");
    write_random_model(options_for(arch, GgmlType::Q8_0), dir / "b.gguf");
    write_random_model(options_for(arch, GgmlType::Q8_0, 2), dir / "c.gguf");
    const auto a = test::read_file_bytes(dir / "a.gguf");
    EXPECT_EQ(a, test::read_file_bytes(dir / "b.gguf")) << arch;
    EXPECT_NE(a, test::read_file_bytes(dir / "c.gguf")) << arch;
  }
}

TEST(RandomModel, WritesWhatTheSpecSays) {
  test::TempDir dir;
  RandomModelOptions o = options_for("qwen2", GgmlType::Q8_0);
  const RandomModelSummary summary = write_random_model(o, dir / "m.gguf");
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "m.gguf");
  EXPECT_EQ(file.architecture(), "qwen2");
  EXPECT_EQ(file.get_uint("general.file_type"), 7u);
  EXPECT_EQ(file.get_uint("qwen2.block_count"), 2u);
  EXPECT_EQ(file.get_uint("qwen2.embedding_length"), 64u);
  EXPECT_EQ(file.get_uint("qwen2.attention.head_count_kv"), 2u);
  EXPECT_EQ(file.get_uint("qwen2.vocab_size"), builtin_vocab_size());
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "llama");
  ASSERT_NE(file.get_array("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(file.get_array("tokenizer.ggml.tokens")->size(), builtin_vocab_size());
  EXPECT_EQ(file.tensors().size(), summary.n_tensors);
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool one_d = t.shape.size() == 1;
    EXPECT_EQ(t.type, one_d ? GgmlType::F32 : GgmlType::Q8_0) << t.name;
  }
  // The stored F32 values are exactly the generator's.
  const gguf::TensorInfo* norm = file.find_tensor("blk.1.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  const std::vector<float> expected =
      random_tensor_values({norm->name, norm->shape, TensorKind::norm}, o.seed);
  ASSERT_EQ(norm->data.size(), expected.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(norm->data.data(), expected.data(), norm->data.size()), 0);
}

TEST(RandomModel, TensorValuesDoNotDependOnOtherTensors) {
  test::TempDir dir;
  RandomModelOptions one = options_for("llama");
  one.geometry.n_layer = 1;
  RandomModelOptions three = options_for("llama");
  three.geometry.n_layer = 3;
  write_random_model(one, dir / "one.gguf");
  write_random_model(three, dir / "three.gguf");
  const gguf::GgufFile a = gguf::GgufFile::open(dir / "one.gguf");
  const gguf::GgufFile b = gguf::GgufFile::open(dir / "three.gguf");
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"}) {
    const auto* ta = a.find_tensor(name);
    const auto* tb = b.find_tensor(name);
    ASSERT_TRUE(ta != nullptr && tb != nullptr) << name;
    ASSERT_EQ(ta->data.size(), tb->data.size());
    EXPECT_EQ(std::memcmp(ta->data.data(), tb->data.data(), ta->data.size()), 0) << name;
  }
}

TEST(RandomModel, FallsBackWhenRowsDoNotFit) {
  test::TempDir dir;
  // n_embd 64 is not a multiple of 256: Q4_K matrices fall back to Q5_0;
  // ffn_down rows (n_ff = 96) too.
  const RandomModelSummary s =
      write_random_model(options_for("llama", GgmlType::Q4_K), dir / "m.gguf");
  EXPECT_GT(s.n_fallbacks, 0u);
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "m.gguf");
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q5_0);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::Q5_0);
  EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  EXPECT_EQ(file.get_uint("general.file_type"), 14u);
}

TEST(RandomModel, CopiesTokenizerFromAnotherFile) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto vocab = test::shared_data_dir() / "vocab" / "ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << vocab << " not found";
  test::TempDir dir;
  RandomModelOptions o = options_for("llama");
  o.geometry.n_embd = 32;
  o.geometry.n_ff = 32;
  o.geometry.n_layer = 1;
  o.vocab_from = vocab;
  const RandomModelSummary s = write_random_model(o, dir / "m.gguf");
  EXPECT_EQ(s.n_vocab, 32000);
  const gguf::GgufFile source = gguf::GgufFile::open(vocab);
  const gguf::GgufFile file = gguf::GgufFile::open(dir / "m.gguf");
  size_t n_tokenizer_keys = 0;
  for (const gguf::KeyValue& kv : source.metadata()) {
    if (!kv.key.starts_with("tokenizer.")) continue;
    ++n_tokenizer_keys;
    EXPECT_NE(file.find(kv.key), nullptr) << kv.key;
  }
  EXPECT_GT(n_tokenizer_keys, 5u);
  EXPECT_EQ(file.find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{32, 32000}));
  o.geometry.n_vocab = 1000;  // disagrees with the tokenizer
  EXPECT_THROW(write_random_model(o, dir / "x.gguf"), Error);
}

}  // namespace
}  // namespace cortiq
