// `cortiq quantize`: recipes, --pure, fallbacks, metadata and errors.
#include <gtest/gtest.h>

#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string gen(const test::TempDir& dir, const std::string& name, const std::string& flags) {
  const std::string path = (dir / name).string();
  std::string out;
  EXPECT_EQ(run_cli("gen-model " + flags + " -o " + path, &out), 0) << out;
  return path;
}

std::string layer(int i, const char* what) {
  return "blk." + std::to_string(i) + "." + what;
}

TEST(CliQuantize, PureGivesEveryMatrixTheType) {
  test::TempDir dir;
  const std::string in = gen(dir, "in.gguf", "--arch qwen2 --layers 2");
  const std::string out_path = (dir / "out.gguf").string();
  std::string out;
  ASSERT_EQ(run_cli("quantize " + in + " " + out_path + " Q4_K --pure --threads 2", &out), 0)
      << out;
  EXPECT_TRUE(contains(out, "quantized 27 tensors")) << out;
  const gguf::GgufFile f = gguf::GgufFile::open(out_path);
  for (const gguf::TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.type, t.shape.size() == 1 ? GgmlType::F32 : GgmlType::Q4_K) << t.name;
  }
  EXPECT_EQ(f.get_uint("general.file_type"), 15u);  // Q4_K is Q4_K_M's default type
  EXPECT_EQ(f.get_uint("general.quantization_version"), 2u);
}

TEST(CliQuantize, RecipeMixtureAndMetadata) {
  test::TempDir dir;
  const std::string in =
      gen(dir, "in.gguf", "--arch llama --layers 8 --heads 8 --kv-heads 2 --embd 256");
  const std::string out_path = (dir / "out.gguf").string();
  std::string out;
  ASSERT_EQ(run_cli("quantize " + in + " " + out_path + " Q4_K_M", &out), 0) << out;
  const gguf::GgufFile src = gguf::GgufFile::open(in);
  const gguf::GgufFile f = gguf::GgufFile::open(out_path);
  EXPECT_EQ(f.get_uint("general.file_type"), 15u);
  EXPECT_EQ(f.get_uint("general.quantization_version"), 2u);
  for (const gguf::KeyValue& kv : src.metadata()) EXPECT_NE(f.find(kv.key), nullptr) << kv.key;
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens")->size(),
            src.get_array("tokenizer.ggml.tokens")->size());
  ASSERT_EQ(f.tensors().size(), src.tensors().size());
  EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, GgmlType::Q4_K);
  EXPECT_EQ(f.find_tensor("output_norm.weight")->type, GgmlType::F32);
  for (int i = 0; i < 8; ++i) {
    const bool more_bits = i == 0 || i == 3 || i == 6 || i == 7;
    const GgmlType expected = more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(f.find_tensor(layer(i, "attn_v.weight"))->type, expected) << i;
    EXPECT_EQ(f.find_tensor(layer(i, "ffn_down.weight"))->type, expected) << i;
    EXPECT_EQ(f.find_tensor(layer(i, "attn_q.weight"))->type, GgmlType::Q4_K) << i;
    EXPECT_EQ(f.find_tensor(layer(i, "attn_norm.weight"))->type, GgmlType::F32) << i;
  }
}

TEST(CliQuantize, FallsBackForRowsThatDoNotFitAndWarns) {
  test::TempDir dir;
  // n_embd 96: rows of 3 blocks of 32, not a 256 block; n_ff 200: not even 32.
  const std::string in =
      gen(dir, "in.gguf", "--arch llama --layers 1 --embd 96 --heads 2 --kv-heads 1 --ff 200");
  const std::string out_path = (dir / "out.gguf").string();
  std::string out;
  ASSERT_EQ(run_cli("quantize " + in + " " + out_path + " Q4_K --pure", &out), 0) << out;
  EXPECT_TRUE(contains(out, "not a multiple")) << out;
  const gguf::GgufFile f = gguf::GgufFile::open(out_path);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q5_0);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up.weight")->type, GgmlType::Q5_0);   // row = 96
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::F16);  // row = 200
  EXPECT_EQ(f.find_tensor("blk.0.ffn_norm.weight")->type, GgmlType::F32);
}

TEST(CliQuantize, RequantizingWarnsAndThreadsDoNotChangeBytes) {
  test::TempDir dir;
  const std::string in = gen(dir, "in.gguf", "--arch llama --layers 1 --type Q8_0");
  const std::string a = (dir / "a.gguf").string(), b = (dir / "b.gguf").string();
  std::string out;
  ASSERT_EQ(run_cli("quantize " + in + " " + a + " Q4_0 --threads 1", &out), 0) << out;
  EXPECT_TRUE(contains(out, "quantized already")) << out;
  ASSERT_EQ(run_cli("quantize " + in + " " + b + " Q4_0 --threads 2", &out), 0) << out;
  EXPECT_EQ(test::read_file_bytes(a), test::read_file_bytes(b));
  const gguf::GgufFile f = gguf::GgufFile::open(a);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, GgmlType::Q4_0);
  EXPECT_EQ(f.find_tensor("output.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(f.get_uint("general.file_type"), 2u);
}

TEST(CliQuantize, UnsupportedInputTypeNamesTheTensor) {
  test::TempDir dir;
  gguf::GgufWriter writer;
  writer.set("general.architecture", gguf::Value(std::string("llama")));
  writer.add_tensor("blk.0.attn_q.weight", GgmlType::IQ2_XXS, {256, 2});
  const std::string in = (dir / "in.gguf").string();
  writer.begin(in);
  writer.write_tensor_data(std::vector<std::byte>(writer.tensor_bytes(0)));
  writer.finish();
  std::string out;
  EXPECT_EQ(run_cli("quantize " + in + " " + (dir / "out.gguf").string() + " Q8_0", &out), 1);
  EXPECT_TRUE(contains(out, "unsupported weight type IQ2_XXS in tensor blk.0.attn_q.weight"))
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.gguf"));
}

// A zero dimension is valid GGUF (the peer accepts it). With rows of length
// 0 the converter divided by the row size: SIGFPE.
TEST(CliQuantize, TensorWithZeroLengthRowsIsWritten) {
  test::TempDir dir;
  gguf::GgufWriter writer;
  writer.set("general.architecture", gguf::Value(std::string("llama")));
  writer.add_tensor("blk.0.attn_q.weight", GgmlType::F32, {0, 64});
  writer.add_tensor("blk.0.attn_k.weight", GgmlType::F32, {32, 2});
  const std::string in = (dir / "in.gguf").string();
  writer.begin(in);
  writer.write_tensor_data({});
  writer.write_tensor_data(std::vector<std::byte>(writer.tensor_bytes(1)));
  writer.finish();
  const std::string out_path = (dir / "out.gguf").string();
  std::string out;
  ASSERT_EQ(run_cli("quantize " + in + " " + out_path + " Q8_0 --pure", &out), 0) << out;
  const gguf::GgufFile f = gguf::GgufFile::open(out_path);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].n_bytes, 0u);
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{0, 64}));
  EXPECT_EQ(f.tensors()[1].type, GgmlType::Q8_0);
}

}  // namespace
}  // namespace cortiq
