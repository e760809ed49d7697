// `cortiq explain` (the next-token distribution) and embeddings (the
// final-normed hidden rows and their pooling).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/json_parser.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/log_softmax.hpp"
#include "model/hparams.hpp"
#include "scoring/embedding.hpp"
#include "scoring/next_token.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

TEST(NextToken, TopTokensAreTheDistributionsHead) {
  std::vector<float> logits = test::normal_values(4, 300, 3.0);
  logits[17] = logits[230] = 20.0f;  // a tie at the top: the lower id first
  const scoring::NextTokenDistribution d = scoring::next_token_distribution(logits, 5);
  ASSERT_EQ(d.top.size(), 5u);
  EXPECT_EQ(d.top[0].id, 17);
  EXPECT_EQ(d.top[1].id, 230);
  for (size_t i = 1; i < d.top.size(); ++i) EXPECT_GE(d.top[i - 1].logit, d.top[i].logit);
  // All of them: probabilities sum to 1; entropy as defined.
  const scoring::NextTokenDistribution all = scoring::next_token_distribution(logits, 1000);
  ASSERT_EQ(all.top.size(), 300u);
  double sum = 0, entropy = 0;
  for (const auto& c : all.top) {
    sum += c.probability;
    entropy -= c.probability * std::log(c.probability);
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_NEAR(all.entropy, entropy, 1e-12);
  EXPECT_NEAR(d.top[0].probability, d.top[1].probability, 1e-15);
}

// The top token of `explain` is the first token `run` generates greedily.
TEST(Explain, ArgmaxIsTheFirstGreedyToken) {
  const std::string model = test::test_model_path({}).string();
  for (const char* prompt : {"Once upon a time", "1 2 3", "the"}) {
    std::string explain, run;
    ASSERT_EQ(
        test::run_cli("explain -m " + model + " -p \"" + prompt + "\" --top 3 --json", &explain), 0)
        << explain;
    ASSERT_EQ(
        test::run_cli("run -m " + model + " -p \"" + prompt + "\" -n 1 --temp 0 --json", &run), 0)
        << run;
    const Json e = parse_json(explain.substr(explain.find('{')));
    const Json r = parse_json(run.substr(run.find('{')));
    const Json& top = *e.find("top");
    EXPECT_EQ(top.array.at(0).find("id")->integer, r.find("ids")->array.at(0).integer) << prompt;
    EXPECT_EQ(e.find("prompt_tokens")->integer, r.find("prompt_tokens")->integer);
    EXPECT_EQ(top.array.size(), 3u);
  }
}

// The hidden rows are the lm_head's input: through the output matrix they
// give the logits.
TEST(Embeddings, HiddenRowsThroughTheOutputMatrixGiveTheLogits) {
  const auto model = test::load_test_model({});
  const std::vector<TokenId> ids = {1, 40, 7, 300, 12, 99};
  Session a(model), b(model);
  const std::vector<float> hidden = a.embeddings(ids);
  const std::vector<float> logits = b.evaluate(ids);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  const auto n_vocab = static_cast<size_t>(model->n_vocab());
  ASSERT_EQ(hidden.size(), ids.size() * n_embd);
  const gguf::TensorInfo* out = model->file().find_tensor("output.weight");
  if (out == nullptr) out = model->file().find_tensor("token_embd.weight");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->type, GgmlType::F32);
  std::vector<float> w(n_vocab * n_embd);
  std::memcpy(w.data(), out->data.data(), w.size() * sizeof(float));
  for (size_t r = 0; r < ids.size(); ++r) {
    for (size_t v = 0; v < n_vocab; v += 37) {
      double dot = 0;
      for (size_t i = 0; i < n_embd; ++i) dot += double(w[v * n_embd + i]) * hidden[r * n_embd + i];
      EXPECT_NEAR(logits[r * n_vocab + v], dot, 1e-4 * (1 + std::abs(dot))) << r << " " << v;
    }
  }
  // Batch invariance carries over: one row alone gives the same bits.
  Session c(model);
  c.embeddings(std::span(ids).first(3));
  const std::vector<float> fourth = c.embeddings(std::span(ids).subspan(3, 1));
  EXPECT_EQ(0, std::memcmp(fourth.data(), hidden.data() + 3 * n_embd, n_embd * sizeof(float)));
}

TEST(Embeddings, Pooling) {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6, -1, 0, 3};  // 3 rows of 3
  using scoring::Pooling;
  EXPECT_EQ(scoring::pool_embeddings(rows, 3, Pooling::mean, false),
            (std::vector<float>{4.0f / 3, 7.0f / 3, 4.0f}));
  EXPECT_EQ(scoring::pool_embeddings(rows, 3, Pooling::last, false),
            (std::vector<float>{-1, 0, 3}));
  EXPECT_EQ(scoring::pool_embeddings(rows, 3, Pooling::cls, false), (std::vector<float>{1, 2, 3}));
  const std::vector<float> unit = scoring::pool_embeddings(rows, 3, Pooling::last, true);
  EXPECT_FLOAT_EQ(unit[0], -1.0f / std::sqrt(10.0f));
  EXPECT_FLOAT_EQ(unit[2], 3.0f / std::sqrt(10.0f));
  EXPECT_FALSE(scoring::parse_pooling("max"));
  std::string out;
  EXPECT_NE(test::run_cli("embed -m " + test::test_model_path({}).string() + " -p hi --pooling max",
                          &out),
            0);
  EXPECT_NE(out.find("--pooling must be mean, last, cls or rank"), std::string::npos) << out;
  // Rank pooling needs a classification head, and gives scores, not a vector to normalize.
  EXPECT_NE(test::run_cli(
                "embed -m " + test::test_model_path({}).string() + " -p hi --pooling rank", &out),
            0);
  EXPECT_NE(out.find("needs a model with a classification head"), std::string::npos) << out;
  EXPECT_NE(test::run_cli("embed -m " + test::test_model_path({}).string() +
                              " -p hi --pooling rank --normalize",
                          &out),
            0);
  ASSERT_EQ(test::run_cli("embed -m " + test::test_model_path({}).string() +
                              " -p \"hello there\" --normalize --json",
                          &out),
            0)
      << out;
  const Json e = parse_json(out.substr(out.find('{')));
  double norm2 = 0;
  for (const Json& v : e.find("embedding")->array) {
    const double x = v.type == Json::Type::integer ? static_cast<double>(v.integer) : v.number;
    norm2 += x * x;
  }
  EXPECT_NEAR(norm2, 1.0, 1e-6);
}

// A BERT file pools as its pooling_type says (the first token for gen-model's
// files, as BGE's) unless --pooling says otherwise; it cannot generate.
TEST(Embeddings, EncoderPoolsAsItsFileSaysAndRefusesToGenerate) {
  const auto path = test::test_model_path({.arch = "bert"}).string();
  std::string out;
  ASSERT_EQ(test::run_cli("embed -m " + path + " --ids \"1 2 3 4\" --json", &out), 0) << out;
  const auto vector_of = [](const std::string& text) {
    std::vector<float> v;
    const Json json = parse_json(text.substr(text.find('{')));
    for (const Json& x : json.find("embedding")->array) {
      v.push_back(static_cast<float>(x.type == Json::Type::integer ? static_cast<double>(x.integer)
                                                                   : x.number));
    }
    return v;
  };
  const std::vector<float> by_file = vector_of(out);
  ASSERT_EQ(test::run_cli("embed -m " + path + " --ids \"1 2 3 4\" --json --pooling cls", &out), 0)
      << out;
  EXPECT_EQ(by_file, vector_of(out));
  ASSERT_EQ(test::run_cli("embed -m " + path + " --ids \"1 2 3 4\" --json --pooling mean", &out), 0)
      << out;
  EXPECT_NE(by_file, vector_of(out));
  EXPECT_NE(test::run_cli("run -m " + path + " --ids \"1 2 3\" -n 2", &out), 0);
  EXPECT_NE(out.find("bert is a text encoder"), std::string::npos) << out;
  // chat refuses it too, before reading a turn.
  EXPECT_NE(test::run_cli("chat -m " + path + " -n 2 < /dev/null", &out), 0);
  EXPECT_NE(out.find("bert is a text encoder"), std::string::npos) << out;
  // An encoder reads its input whole, in one pass: longer than the context
  // is refused, naming both lengths.
  std::string ids;
  for (int i = 0; i < 300; ++i) ids += std::to_string(1 + i % 200) + " ";
  EXPECT_EQ(test::run_cli("embed -m " + path + " --ids \"" + ids + "\"", &out), 1);
  EXPECT_NE(out.find("300"), std::string::npos) << out;
  EXPECT_NE(out.find("256"), std::string::npos) << out;
}

}  // namespace
}  // namespace cortiq
