// `cortiq explain -m FILE -p TEXT [--top K] [--json]`: the next-token
// distribution after a prompt — the K most likely tokens with ids, text,
// logits and probabilities. Its first row is the first token `cortiq run`
// generates greedily from the same prompt.
#include <cstdio>

#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/scoring_args.hpp"
#include "cortiq/cortiq.hpp"
#include "scoring/next_token.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser explain_parser() {
  ArgParser parser("explain", "-m FILE (-p TEXT | --ids \"1 2 3\") [--top K] [--json]",
                   "Shows the model's next-token distribution after the prompt: the K most\n"
                   "likely tokens with their ids, text, logits and probabilities, and the\n"
                   "entropy of the whole distribution. The prompt is tokenized as `run` does.");
  add_model_options(parser);
  add_prompt_options(parser);
  parser.option("--top", "K", "how many tokens to show", "10")
      .flag("--json", "print {\"prompt_tokens\", \"entropy\", \"top\": [...]} instead");
  return parser;
}

void print_json(const scoring::NextTokenDistribution& d, const Tokenizer& tokenizer,
                size_t prompt_tokens) {
  JsonWriter json;
  json.begin_object();
  json.key("prompt_tokens").value(static_cast<int64_t>(prompt_tokens));
  json.key("entropy").value(d.entropy);
  json.key("top").begin_array();
  for (const TokenChoice& c : d.top) {
    json.begin_object();
    json.key("id").value(static_cast<int64_t>(c.id));
    json.key("text").value(tokenizer.token_to_piece(c.id, true));
    json.key("logit").value(static_cast<double>(c.logit));
    json.key("probability").value(c.probability);
    json.key("log_prob").value(c.log_prob);
    json.end_object();
  }
  json.end_array();
  json.end_object();
  std::printf("%s\n", json.text().c_str());
}

void print_table(const scoring::NextTokenDistribution& d, const Tokenizer& tokenizer,
                 size_t prompt_tokens) {
  std::printf("next token after %zu prompt tokens (entropy %.4f nats)\n", prompt_tokens, d.entropy);
  std::printf("%5s %8s %12s %10s  %s\n", "rank", "id", "logit", "prob", "text");
  for (size_t i = 0; i < d.top.size(); ++i) {
    const TokenChoice& c = d.top[i];
    std::printf("%5zu %8d %12.4f %10.6f  '%s'\n", i + 1, c.id, static_cast<double>(c.logit),
                c.probability, escape_piece(tokenizer.token_to_piece(c.id, true)).c_str());
  }
}

}  // namespace

int run_explain(std::span<const std::string> argv) {
  const auto parsed = explain_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  require_one_prompt(args);
  const auto top = static_cast<size_t>(args.get_int("top", 1, 1 << 20));
  const auto model = load_model_from(args, given_ids_count(args));
  const std::vector<TokenId> ids = prompt_ids(args, *model);
  Session session(model);
  session.append(ids);
  const scoring::NextTokenDistribution d =
      scoring::next_token_distribution(session.last_logits(), top);
  if (args.has("json")) {
    print_json(d, model->tokenizer(), ids.size());
  } else {
    print_table(d, model->tokenizer(), ids.size());
  }
  return 0;
}

}  // namespace cortiq::cli
