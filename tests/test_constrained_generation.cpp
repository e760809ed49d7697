// Generation under a grammar (GenerateOptions::grammar, `--grammar FILE`):
// on a random-weight model, which writes anything it is allowed to, every
// seeded generation is a sentence of the grammar; greedy takes the best
// allowed token; drafting is off; the CLI reads the file and names the
// line of a grammar error, and takes a JSON Schema inline or from a file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "base/error.hpp"
#include "engine_test_models.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/token_mask.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

// A small record with bounded lengths: every generation ends inside the
// token budget below.
constexpr std::string_view kRecord =
    R"(root ::= "{" ws "\"name\":" ws "\"" [a-z]{1,8} "\"" ws "," ws "\"age\":" ws age ws "}"
age  ::= [1-9] [0-9]? | "0"
ws   ::= " "?
)";

bool is_sentence(const std::shared_ptr<const grammar::CompiledGrammar>& g, std::string_view text) {
  grammar::GrammarMatcher matcher(g);
  return matcher.accept(text) && matcher.can_end();
}

GenerateOptions sampled(uint64_t seed) {
  GenerateOptions o;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = seed;
  o.max_tokens = 200;
  return o;
}

TEST(ConstrainedGeneration, EverySeedGivesASentenceOfTheGrammar) {
  const auto model = test::load_test_model({});
  const auto record = compile_grammar(kRecord);
  int ended_by_token = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Session session(model);
    GenerateOptions o = sampled(seed);
    o.grammar = record;
    o.ignore_eos = seed % 2 == 0;  // the grammar's end stops it either way
    const GenerateResult r = session.generate("Once upon a time", o);
    EXPECT_TRUE(is_sentence(record, r.text)) << "seed " << seed << ": " << r.text;
    EXPECT_EQ(r.finish_reason, FinishReason::stop) << r.text;
    ended_by_token +=
        !r.tokens.empty() && model->tokenizer().vocab().is_end_of_generation(r.tokens.back());
  }
  EXPECT_GT(ended_by_token, 0);  // an end token was sampled where the grammar may end
  // Without the grammar the same seeds write something else.
  const GenerateResult free = Session(model).generate("Once upon a time", sampled(1));
  EXPECT_FALSE(is_sentence(record, free.text));
}

// The test vocabulary is SentencePiece's with a dummy prefix: the output
// shows its first token without the piece's leading space, and the grammar
// must see that text (a token "▁ab" is "ab" there, not " ab").
TEST(ConstrainedGeneration, TheFirstTokenIsMatchedAsTheOutputShowsIt) {
  const auto model = test::load_test_model({});
  const auto spaced = compile_grammar(R"(root ::= " " [a-z]{2,6} ".")");
  const auto bare = compile_grammar(R"(root ::= [a-z]{2,6} " " [a-z]{2,6} ".")");
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (const auto& g : {spaced, bare}) {
      GenerateOptions o = sampled(seed);
      o.grammar = g;
      const GenerateResult r = Session(model).generate("Once upon a time", o);
      EXPECT_TRUE(is_sentence(g, r.text)) << "seed " << seed << ": \"" << r.text << "\"";
    }
  }
}

TEST(ConstrainedGeneration, GreedyTakesTheBestAllowedToken) {
  const auto model = test::load_test_model({});
  const auto g = compile_grammar(R"(root ::= [a-m]+ " " [n-z]+)");
  Session session(model);
  const std::vector<TokenId> prompt = test::prompt_of(12, 3);
  const std::vector<float> logits = session.evaluate(prompt);
  const auto last = std::span<const float>(logits).last(static_cast<size_t>(model->n_vocab()));
  // The best token whose text, as the output shows a first token (without
  // a SentencePiece piece's leading space), the grammar takes: each piece
  // fed by itself, not through the mask.
  const Tokenizer& tokenizer = model->tokenizer();
  TokenId best = kNoToken;
  for (TokenId id = 0; id < model->n_vocab(); ++id) {
    if (tokenizer.token_to_piece(id).empty()) continue;  // control tokens write nothing
    const std::string piece = tokenizer.output_piece(id, /*first=*/true);
    grammar::GrammarMatcher matcher(g);
    if (!matcher.accept(piece)) continue;
    if (best == kNoToken || last[static_cast<size_t>(id)] > last[static_cast<size_t>(best)]) {
      best = id;
    }
  }
  ASSERT_NE(best, kNoToken);
  session.reset();
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = 6;
  o.grammar = g;
  const GenerateResult r = session.generate(std::span<const TokenId>(prompt), o);
  ASSERT_FALSE(r.tokens.empty());
  EXPECT_EQ(r.tokens[0], best);
  grammar::GrammarMatcher follow(g);
  EXPECT_TRUE(follow.accept(r.text)) << r.text;
}

// Where only banned tokens could go on, the generation fails saying so,
// rather than ending with text the grammar has not finished.
TEST(ConstrainedGeneration, ADeadEndIsAnError) {
  const auto model = test::load_test_model({});
  const auto g = compile_grammar(R"(root ::= "q" "q")");
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = 8;
  o.grammar = g;
  const GenerateResult free = Session(model).generate("Once upon a time", o);
  EXPECT_EQ(free.text, "qq");
  EXPECT_EQ(free.finish_reason, FinishReason::stop);
  // Ban every token that could write the second "q" (and "qq" at once).
  const Tokenizer& tokenizer = model->tokenizer();
  for (TokenId id = 0; id < model->n_vocab(); ++id) {
    const std::string piece = tokenizer.token_to_piece(id);
    if (piece == "q" || piece == " q" || piece == "qq" || piece == " qq") {
      o.sampling.suppressed.push_back(id);
    }
  }
  ASSERT_FALSE(o.sampling.suppressed.empty());
  try {
    Session(model).generate("Once upon a time", o);
    ADD_FAILURE() << "a generation with every way on banned went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no token continues the output under the grammar"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConstrainedGeneration, DraftingIsOffUnderAGrammar) {
  const auto model = test::load_test_model({});
  const auto g = compile_grammar(R"(root ::= ("ab" | "ba" | " ")+)");
  GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_tokens = 24;
  o.grammar = g;
  const GenerateResult plain = Session(model).generate("ab ab ab ab", o);
  o.speculative.drafter = std::make_shared<PromptLookupDrafter>(1, 3);
  const GenerateResult drafted = Session(model).generate("ab ab ab ab", o);
  EXPECT_EQ(drafted.tokens, plain.tokens);
  EXPECT_EQ(drafted.speculative.drafted, 0);
}

TEST(CliRun, GrammarFileConstrainsTheOutputAndNamesItsErrors) {
  const test::TempDir dir;
  {
    std::ofstream(dir / "record.gbnf") << kRecord;
    std::ofstream(dir / "bad.gbnf") << "root ::= item\nitem ::= \"a\" (\n";
  }
  const std::string model = "-m " + test::test_model_path({}).string();
  ::setenv("CORTIQ_LOG", "warn", 1);
  std::string out;
  const int status =
      test::run_cli("run " + model + " -p 'Hello' -n 200 --temp 1 --seed 5 --grammar " +
                        (dir / "record.gbnf").string(),
                    &out);
  ::unsetenv("CORTIQ_LOG");
  ASSERT_EQ(status, 0) << out;
  ASSERT_FALSE(out.empty());
  out.pop_back();  // the newline after the text
  EXPECT_TRUE(is_sentence(compile_grammar(kRecord), out)) << out;
  std::string error;
  EXPECT_EQ(test::run_cli("run " + model + " -p 'Hello' --grammar " + (dir / "bad.gbnf").string(),
                          &error),
            1);
  EXPECT_NE(error.find("bad.gbnf: grammar line 2, column 14: expected ')' to close the group"),
            std::string::npos)
      << error;
  EXPECT_NE(test::run_cli("run " + model + " -p 'Hello' --grammar " + (dir / "none.gbnf").string(),
                          &error),
            0);
  EXPECT_NE(error.find("none.gbnf: cannot read"), std::string::npos) << error;
}

TEST(CliRun, JsonSchemaInlineOrFromAFile) {
  const test::TempDir dir;
  constexpr std::string_view kSchema =
      R"({"type": "object", "properties": {"n": {"enum": [1, 2, 3]}}, "required": ["n"]})";
  {
    std::ofstream(dir / "schema.json") << kSchema;
    std::ofstream(dir / "bad.json") << R"({"properties": {"u": {"format": "uri"}}})";
  }
  const std::string run =
      "run -m " + test::test_model_path({}).string() + " -p 'Hello' -n 50 --temp 1 ";
  const auto accepts = compile_json_schema(kSchema);
  for (const std::string& schema :
       {"'" + std::string(kSchema) + "'", (dir / "schema.json").string()}) {
    std::string out;
    ::setenv("CORTIQ_LOG", "warn", 1);
    const int status = test::run_cli(run + "--seed 3 --json-schema " + schema, &out);
    ::unsetenv("CORTIQ_LOG");
    ASSERT_EQ(status, 0) << out;
    ASSERT_FALSE(out.empty());
    out.pop_back();
    EXPECT_TRUE(is_sentence(accepts, out)) << out;
  }
  std::string error;
  EXPECT_EQ(test::run_cli(run + "--json-schema " + (dir / "bad.json").string(), &error), 1);
  EXPECT_NE(
      error.find("bad.json: JSON schema at /properties/u/format: format \"uri\" is not supported"),
      std::string::npos)
      << error;
  EXPECT_NE(test::run_cli(run + "--json-schema '{\"type\": 3}'", &error), 0);
  EXPECT_NE(error.find("JSON schema at /type: type must be a string"), std::string::npos) << error;
  EXPECT_NE(test::run_cli(run + "--json-schema '{}' --grammar x.gbnf", &error), 0);
  EXPECT_NE(error.find("--grammar and --json-schema cannot be used together"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace cortiq
