// `cortiq inspect`: text and JSON reports of a GGUF file.
#include <gtest/gtest.h>

#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "json_syntax.hpp"
#include "model/gen_model/builtin_vocab.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (dir_ / "m.gguf").string();
    std::string out;
    ASSERT_EQ(run_cli("gen-model --arch llama --layers 2 --type Q8_0 -o " + model_, &out), 0)
        << out;
  }
  test::TempDir dir_;
  std::string model_;
};

// A type the engine does not compute with (README "Weight types": IQ2_*
// and the like) is listed by inspect, and refused at load naming the type
// and the tensor.
TEST_F(CliInspect, ListsATypeThatLoadingRefuses) {
  const gguf::GgufFile file = gguf::GgufFile::open(model_);
  const std::string name = "blk.0.attn_q.weight";
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  for (const gguf::TensorInfo& t : file.tensors()) {
    writer.add_tensor(t.name, t.name == name ? GgmlType::IQ2_XXS : t.type, t.shape);
  }
  const std::string edited = (dir_ / "iq2.gguf").string();
  writer.begin(edited);
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& t = file.tensors()[i];
    if (t.name == name) {
      writer.write_tensor_data(std::vector<std::byte>(writer.tensor_bytes(i)));
    } else {
      writer.write_tensor_data(t.data);
    }
  }
  writer.finish();
  std::string out;
  ASSERT_EQ(run_cli("inspect " + edited, &out), 0) << out;
  const auto line = out.find(name);
  ASSERT_NE(line, std::string::npos) << out;
  EXPECT_TRUE(contains(out.substr(line, out.find('\n', line) - line), "IQ2_XXS")) << out;
  EXPECT_EQ(run_cli("run -m " + edited + " --ids '1 2' -n 1", &out), 1);
  EXPECT_TRUE(contains(out, "unsupported weight type IQ2_XXS in tensor " + name)) << out;
}

TEST_F(CliInspect, TextShowsHeaderKeysTensorsAndTotals) {
  std::string out;
  ASSERT_EQ(run_cli("inspect " + model_, &out), 0) << out;
  EXPECT_TRUE(contains(out, "version 3, alignment 32, 1 split")) << out;
  EXPECT_TRUE(contains(out, "general.architecture"));
  EXPECT_TRUE(contains(out, "\"llama\""));
  EXPECT_TRUE(contains(out, "llama.block_count"));
  EXPECT_TRUE(contains(out, "array[string]"));
  // Long arrays are abridged with their count.
  EXPECT_TRUE(contains(out, "... (" + std::to_string(builtin_vocab_size()) + " items)")) << out;
  EXPECT_TRUE(contains(out, "blk.1.ffn_down.weight"));
  EXPECT_TRUE(contains(out, "Q8_0"));
  EXPECT_TRUE(contains(out, "[512, 256]"));
  EXPECT_TRUE(contains(out, "tensors     21"));
  EXPECT_TRUE(contains(out, "parameters"));
}

TEST_F(CliInspect, JsonParsesAndHasEveryKey) {
  std::string out;
  ASSERT_EQ(run_cli("inspect --json " + model_ + " 2>/dev/null", &out), 0) << out;
  EXPECT_TRUE(test::JsonSyntax::valid(out)) << out;
  const gguf::GgufFile file = gguf::GgufFile::open(model_);
  for (const gguf::KeyValue& kv : file.metadata()) {
    EXPECT_TRUE(contains(out, "\"key\": \"" + kv.key + "\"")) << kv.key;
  }
  for (const gguf::TensorInfo& t : file.tensors()) {
    EXPECT_TRUE(contains(out, "\"name\": \"" + t.name + "\"")) << t.name;
  }
  EXPECT_TRUE(contains(out, "\"n_tensors\": 21"));
  EXPECT_TRUE(contains(out, "\"truncated\": true"));
  EXPECT_TRUE(contains(out, "\"count\": " + std::to_string(builtin_vocab_size())));

  std::string full;
  ASSERT_EQ(run_cli("inspect --json --full " + model_ + " 2>/dev/null", &full), 0);
  EXPECT_TRUE(test::JsonSyntax::valid(full));
  EXPECT_FALSE(contains(full, "\"truncated\""));
  EXPECT_TRUE(contains(full, "\"<0xFF>\""));  // the whole token list
  EXPECT_GT(full.size(), out.size());
}

// Every real vocabulary file reads, and the report names every key.
TEST(CliInspectVocab, ReadsEverySharedVocabFile) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto vocab_dir = test::shared_data_dir() / "vocab";
  if (!std::filesystem::is_directory(vocab_dir)) GTEST_SKIP() << vocab_dir << " not found";
  size_t n_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(vocab_dir)) {
    if (entry.path().extension() != ".gguf") continue;
    ++n_files;
    std::string text, json;
    ASSERT_EQ(run_cli("inspect " + entry.path().string(), &text), 0) << entry.path() << text;
    ASSERT_EQ(run_cli("inspect --json " + entry.path().string() + " 2>/dev/null", &json), 0);
    EXPECT_TRUE(test::JsonSyntax::valid(json)) << entry.path();
    const gguf::GgufFile file = gguf::GgufFile::open(entry.path());
    for (const gguf::KeyValue& kv : file.metadata()) {
      EXPECT_TRUE(contains(text, kv.key)) << entry.path() << ": " << kv.key;
    }
    EXPECT_TRUE(contains(text, "tensors     " + std::to_string(file.tensors().size())));
  }
  EXPECT_GT(n_files, 0u);
}

}  // namespace
}  // namespace cortiq
