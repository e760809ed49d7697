// `cortiq template`: renders a conversation with a model's chat template,
// falling back to ChatML (with a warning) when the model has none.
#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

class CliTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    ASSERT_EQ(run_cli("gen-model --arch llama --layers 1 --type F32 -o " + model_, &out), 0) << out;
  }
  test::TempDir dir_;
  std::string model_ = (dir_ / "tiny.gguf").string();
};

TEST_F(CliTemplate, ModelWithoutTemplateGetsChatMLWithAWarning) {
  std::string out;
  ASSERT_EQ(run_cli("template -m " + model_ +
                        " --add-generation-prompt --messages "
                        "'[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"Hi\"}]'",
                    &out),
            0)
      << out;
  EXPECT_NE(out.find("has no tokenizer.chat_template; using ChatML"), std::string::npos) << out;
  EXPECT_NE(out.find("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                     "<|im_start|>assistant\n"),
            std::string::npos)
      << out;
}

TEST_F(CliTemplate, BadInputIsAUsageError) {
  std::string out;
  EXPECT_EQ(run_cli("template -m " + model_, &out), 2) << out;
  EXPECT_NE(out.find("--messages"), std::string::npos) << out;
  EXPECT_EQ(run_cli("template -m " + model_ + " --messages '{\"role\":\"user\"}'", &out), 2) << out;
  EXPECT_NE(out.find("expected a JSON list"), std::string::npos) << out;
  EXPECT_EQ(run_cli("template -m " + model_ + " --messages '[{'", &out), 1) << out;
}

TEST_F(CliTemplate, KwargsReachTheTemplate) {
  // ChatML ignores extra variables; the command must still accept them.
  std::string out;
  EXPECT_EQ(run_cli("template -m " + model_ +
                        " --kwargs '{\"enable_thinking\": false}' --messages "
                        "'[{\"role\":\"user\",\"content\":\"Hi\"}]'",
                    &out),
            0)
      << out;
  EXPECT_EQ(run_cli("template -m " + model_ + " --kwargs '[1]' --messages '[]'", &out), 2) << out;
}

}  // namespace
}  // namespace cortiq

namespace cortiq {
namespace {

TEST(CliTemplateReal, RendersTheQwen2TemplateOfAVocabFile) {
  CORTIQ_REQUIRE_SHARED_DATA();
  const auto vocab = test::shared_data_dir() / "vocab" / "ggml-vocab-qwen2.gguf";
  std::string out;
  ASSERT_EQ(test::run_cli("template -m " + vocab.string() +
                              " --add-generation-prompt --messages "
                              "'[{\"role\":\"user\",\"content\":\"Hi\"}]'",
                          &out),
            0)
      << out;
  // Qwen2.5's template adds its default system prompt when none is given.
  EXPECT_EQ(out.rfind("<|im_start|>system\n", 0), 0u) << out;
  EXPECT_NE(out.find("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace cortiq
