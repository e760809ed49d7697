// The peer's vocabulary files from ../shared/data/vocab: real GGUF files
// written by the peer's Python writer.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/gguf/gguf_file.hpp"
#include "test_support.hpp"

namespace cortiq::gguf {
namespace {

std::vector<std::filesystem::path> vocab_files() {
  std::vector<std::filesystem::path> files;
  const auto dir = test::shared_data_dir() / "vocab";
  if (!std::filesystem::is_directory(dir)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(GgufVocab, EveryVocabFileOpens) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto files = vocab_files();
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.n_splits(), 1u);
    EXPECT_FALSE(file.architecture().empty());
    const Array* tokens = file.get_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->element_type, ValueType::string);
    EXPECT_GT(tokens->size(), 1000u);
    EXPECT_TRUE(file.get_string("tokenizer.ggml.model").has_value());
    for (const TensorInfo& t : file.tensors()) EXPECT_EQ(t.data.size(), t.n_bytes) << t.name;
  }
}

TEST(GgufVocab, LlamaSpmHas32000Tokens) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto path = test::shared_data_dir() / "vocab" / "ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const GgufFile file = GgufFile::open(path);
  EXPECT_EQ(file.architecture(), "llama");
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "llama");
  const Array* tokens = file.get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  const auto* strings = tokens->as<std::string>();
  ASSERT_NE(strings, nullptr);
  ASSERT_EQ(strings->size(), 32000u);
  EXPECT_EQ((*strings)[0], "<unk>");
  EXPECT_EQ((*strings)[1], "<s>");
  EXPECT_EQ((*strings)[2], "</s>");
  const Array* scores = file.get_array("tokenizer.ggml.scores");
  ASSERT_NE(scores, nullptr);
  ASSERT_NE(scores->as<float>(), nullptr);
  EXPECT_EQ(scores->size(), 32000u);
}

}  // namespace
}  // namespace cortiq::gguf
