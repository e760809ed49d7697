// OpenAI request parsing: every malformed field is a 400 naming it; valid
// requests become the jobs the scheduler runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "grammar/grammar_matcher.hpp"
#include "server/api_error.hpp"
#include "server/openai_protocol.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::server {
namespace {

class ServerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    test::TestModelSpec spec;
    spec.n_ctx = 128;
    model_ = test::load_test_model(spec);
    template_ = std::make_unique<ChatTemplate>(chatml_template());
    api_ = std::make_unique<ApiContext>(ApiContext{*model_, *template_, "test", 128});
  }

  GenerationRequest chat(const std::string& body) {
    return parse_generation_request(Endpoint::chat, parse_body(body), *api_);
  }
  GenerationRequest completion(const std::string& body) {
    return parse_generation_request(Endpoint::completion, parse_body(body), *api_);
  }

  // The request is refused with a 400 whose message contains `needle`.
  template <class F>
  void expect_400(F parse, const std::string& needle) {
    try {
      parse();
      ADD_FAILURE() << "accepted; expected an error about " << needle;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<ApiContext> api_;
};

// A chat body: one user message, then `fields` (",..." or "").
std::string hello_with(std::string_view fields) {
  std::string body = R"({"messages":[{"role":"user","content":"hello"}])";
  body += fields;
  body += '}';
  return body;
}

// response_format and "grammar" give every job of the request one grammar;
// what cannot be used is a 400 naming the field and the problem.
TEST_F(ServerProtocol, ResponseFormatConstrainsEveryChoice) {
  EXPECT_EQ(chat(hello_with(R"(,"response_format":{"type":"text"})")).jobs[0].grammar, nullptr);
  const auto object = chat(hello_with(R"(,"n":2,"response_format":{"type":"json_object"})"));
  ASSERT_NE(object.jobs[0].grammar, nullptr);
  EXPECT_EQ(object.jobs[0].grammar, object.jobs[1].grammar);
  const std::string body = hello_with(
      R"(,"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":
      {"type":"object","properties":{"zeta":{"const":1},"alpha":{"const":2}},"required":["zeta","alpha"]}}})");
  // The members in the order written, given the body's text; by name without it.
  const auto written = parse_generation_request(Endpoint::chat, parse_body(body), *api_, body);
  grammar::GrammarMatcher in_order(written.jobs[0].grammar);
  EXPECT_TRUE(in_order.accept(R"({"zeta": 1, "alpha": 2})") && in_order.can_end());
  grammar::GrammarMatcher by_name(chat(body).jobs[0].grammar);
  EXPECT_TRUE(by_name.accept(R"({"alpha": 2, "zeta": 1})") && by_name.can_end());
  const auto yes_no = completion(R"({"prompt":"?","grammar":"root ::= \"yes\" | \"no\""})");
  grammar::GrammarMatcher gbnf(yes_no.jobs[0].grammar);
  EXPECT_TRUE(gbnf.accept("no") && gbnf.can_end());

  expect_400([&] { chat(hello_with(R"(,"response_format":"json")")); },
             "'response_format' must be an object");
  expect_400([&] { chat(hello_with(R"(,"response_format":{"type":"xml"})")); },
             "'response_format.type' must be");
  expect_400([&] { chat(hello_with(R"(,"response_format":{"type":"json_schema"})")); },
             "needs a 'json_schema' object");
  expect_400(
      [&] {
        chat(hello_with(
            R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"integer","multipleOf":2}}})"));
      },
      "'response_format.json_schema.schema': JSON schema at the top: \"multipleOf\" cannot be "
      "expressed");
  expect_400([&] { chat(hello_with(R"(,"grammar":"root ::= (")")); }, "'grammar': grammar line 1");
  expect_400(
      [&] {
        chat(hello_with(R"(,"grammar":"root ::= \"a\"","response_format":{"type":"json_object"})"));
      },
      "exclude each other");
}

TEST_F(ServerProtocol, ChatRequestBecomesJobs) {
  const auto r = chat(hello_with(R"(,"temperature":0.5,"top_p":0.9,"top_k":7,"min_p":0.1,"seed":42,
      "max_tokens":10,"stop":["x","y"],"n":3,"presence_penalty":1,"frequency_penalty":-1,
      "logit_bias":{"5":-100,"6":3},"logprobs":true,"top_logprobs":4,"stream":true,
      "stream_options":{"include_usage":true},"ignore_eos":true)"));
  ASSERT_EQ(r.jobs.size(), 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 4);
  for (int c = 0; c < 3; ++c) {
    const auto& job = r.jobs[static_cast<size_t>(c)];
    EXPECT_EQ(job.choice, c);
    EXPECT_EQ(job.sampling.seed, 42u + static_cast<uint64_t>(c));
    EXPECT_FLOAT_EQ(job.sampling.temperature, 0.5f);
    EXPECT_EQ(job.sampling.top_k, 7);
    EXPECT_EQ(job.sampling.logit_bias.size(), 2u);
    EXPECT_EQ(job.max_tokens, 10);
    EXPECT_EQ(job.stop, (std::vector<std::string>{"x", "y"}));
    EXPECT_TRUE(job.ignore_eos);
    EXPECT_EQ(job.prompt, r.jobs[0].prompt);
  }
  // ChatML rendered, then tokenized with the model's BOS.
  EXPECT_EQ(r.jobs[0].prompt.front(), model_->tokenizer().vocab().bos);
}

TEST_F(ServerProtocol, MaxTokensIsCappedByTheContext) {
  const auto r = completion(R"({"prompt":[1,2,3,4,5,6,7,8,9,10],"max_tokens":1000})");
  EXPECT_EQ(r.jobs[0].max_tokens, 118);
  EXPECT_EQ(completion(R"({"prompt":"hi"})").jobs[0].max_tokens, 16);  // OpenAI's default
}

TEST_F(ServerProtocol, CompletionPromptsInEveryShape) {
  EXPECT_EQ(completion(R"({"prompt":[5,6,7]})").jobs[0].prompt, (std::vector<TokenId>{5, 6, 7}));
  EXPECT_EQ(completion(R"({"prompt":["a","b"],"n":2})").jobs.size(), 4u);
  EXPECT_EQ(completion(R"({"prompt":[[1,2],[3]]})").jobs[1].prompt, (std::vector<TokenId>{3}));
}

TEST_F(ServerProtocol, MalformedRequestsAreRefusedNamingTheProblem) {
  expect_400([&] { parse_body("{\"messages\": ["); }, "not valid JSON");
  expect_400([&] { parse_body("[1,2]"); }, "JSON object");
  expect_400([&] { chat("{}"); }, "'messages'");
  expect_400([&] { chat(R"({"messages":[]})"); }, "empty");
  expect_400([&] { chat(R"({"messages":{"role":"user"}})"); }, "'messages'");
  expect_400([&] { chat(R"({"messages":[{"role":"wizard","content":"x"}]})"); }, "unknown role");
  expect_400([&] { chat(R"({"messages":[{"role":"user","content":5}]})"); }, "content");
  expect_400([&] { chat(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"); },
             "image_url");
  expect_400([&] { chat(hello_with(R"(,"max_tokens":-1)")); }, "'max_tokens'");
  expect_400([&] { chat(hello_with(R"(,"max_tokens":"5")")); }, "'max_tokens'");
  expect_400([&] { chat(hello_with(R"(,"max_tokens":1e30)")); }, "'max_tokens'");
  expect_400([&] { chat(hello_with(R"(,"temperature":"hot")")); }, "'temperature'");
  expect_400([&] { chat(hello_with(R"(,"temperature":3)")); }, "'temperature'");
  expect_400([&] { chat(hello_with(R"(,"n":0)")); }, "'n'");
  expect_400([&] { chat(hello_with(R"(,"stop":{"a":1})")); }, "'stop'");
  expect_400([&] { chat(hello_with(R"(,"logit_bias":{"x":1})")); }, "logit_bias");
  expect_400([&] { chat(hello_with(R"(,"logit_bias":{"99999":1})")); }, "logit_bias");
  expect_400([&] { chat(hello_with(R"(,"top_logprobs":3)")); }, "logprobs");
  expect_400([&] { chat(hello_with(R"(,"stream":"yes")")); }, "'stream'");
  expect_400([&] { completion(R"({"prompt":[1,-2]})"); }, "outside the vocabulary");
  expect_400([&] { completion(R"({"prompt":[1,99999]})"); }, "outside the vocabulary");
  expect_400([&] { completion(R"({"prompt":{"a":1}})"); }, "'prompt'");
  expect_400([&] { completion(R"({"prompt":[[[1]]]})"); }, "'prompt'");
  expect_400([&] { completion(R"({"prompt":"x","echo":true})"); }, "echo");
  std::string long_prompt = R"({"prompt":[)";
  for (int i = 0; i < 200; ++i) {
    if (i > 0) long_prompt += ',';
    long_prompt += std::to_string(3 + i % 50);
  }
  expect_400([&] { completion(long_prompt + "]}"); }, "context");
}

TEST_F(ServerProtocol, EmbeddingInputs) {
  const auto r = parse_embedding_request(
      parse_body(R"({"input":["hello world",[4,5,6]],"encoding_format":"base64"})"), *api_);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.jobs[1].tokens, (std::vector<TokenId>{4, 5, 6}));
  expect_400([&] { parse_embedding_request(parse_body(R"({"input":5})"), *api_); }, "'input'");
  expect_400([&] { parse_embedding_request(parse_body(R"({"input":"x","dimensions":3})"), *api_); },
             "dimensions");
}

TEST_F(ServerProtocol, InvalidUtf8IsReplacedWhenSerialized) {
  Json json = {{"text", std::string("a\xff"
                                    "b")}};
  EXPECT_EQ(dump(json),
            "{\"text\":\"a\xEF\xBF\xBD"
            "b\"}");
}

}  // namespace
}  // namespace cortiq::server
