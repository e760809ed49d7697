// `cortiq embed -m FILE -p TEXT [--pooling mean|last|cls] [--normalize]
// [--json]`: a text's embedding from the model's final-normed hidden states.
#include <cstdio>

#include "base/json_writer.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/scoring_args.hpp"
#include "cortiq/cortiq.hpp"
#include "model/hparams.hpp"
#include "scoring/embedding.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser embed_parser() {
  ArgParser parser("embed", "-m FILE (-p TEXT | --ids \"1 2 3\") [options]",
                   "Prints the text's embedding: the model's final-normed hidden states (the\n"
                   "input of its output layer), pooled over the tokens. One line of numbers, or\n"
                   "a JSON object with --json.");
  add_model_options(parser);
  add_prompt_options(parser);
  parser.option("--pooling", "P", "mean (over the tokens), last or cls (the first token)", "mean")
      .flag("--normalize", "scale the vector to unit length")
      .flag("--json", "print {\"tokens\", \"dimensions\", \"embedding\": [...]}");
  return parser;
}

}  // namespace

int run_embed(std::span<const std::string> argv) {
  const auto parsed = embed_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  require_one_prompt(args);
  const auto pooling = scoring::parse_pooling(args.get("pooling"));
  if (!pooling) throw UsageError("--pooling must be mean, last or cls, got " + args.get("pooling"));
  const auto model = load_model_from(args, given_ids_count(args));
  const std::vector<TokenId> ids = prompt_ids(args, *model);
  Session session(model);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  const std::vector<float> vector =
      scoring::pool_embeddings(session.embeddings(ids), n_embd, *pooling, args.has("normalize"));
  if (args.has("json")) {
    JsonWriter json;
    json.begin_object();
    json.key("tokens").value(static_cast<int64_t>(ids.size()));
    json.key("dimensions").value(static_cast<int64_t>(n_embd));
    json.key("embedding").begin_array();
    for (const float v : vector) json.value(static_cast<double>(v));
    json.end_array();
    json.end_object();
    std::printf("%s\n", json.text().c_str());
  } else {
    for (size_t i = 0; i < vector.size(); ++i) {
      std::printf("%s%.9g", i ? " " : "", static_cast<double>(vector[i]));
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace cortiq::cli
