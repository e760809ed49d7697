// `cortiq embed -m FILE -p TEXT [--pooling mean|last|cls|rank] [--normalize]
// [--json]`: a text's embedding from the model's final-normed hidden states,
// or with rank pooling a reranker's label scores (its classification head on
// the last token).
#include <cstdio>

#include "base/json_writer.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/scoring_args.hpp"
#include "cortiq/cortiq.hpp"
#include "model/blocks/classifier.hpp"
#include "model/decoder_model.hpp"
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
  parser
      .option("--pooling", "P",
              "mean (over the tokens), last, cls (the first token), or rank (a reranker's\n"
              "scores: its classification head on the last token); default: what the file's\n"
              "pooling_type says (BERT models), else mean",
              "")
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
  const bool pooling_given = !args.get("pooling").empty();
  std::optional<scoring::Pooling> pooling = scoring::parse_pooling(args.get("pooling"));
  if (pooling_given && !pooling) {
    throw UsageError("--pooling must be mean, last, cls or rank, got " + args.get("pooling"));
  }
  const auto model = load_model_from(args, given_ids_count(args));
  if (!pooling_given) pooling = scoring::pooling_of_file(model->hparams().pooling_type);
  const ClassifierHead* classifier = model->decoder().classifier();
  if (*pooling == scoring::Pooling::rank && args.has("normalize")) {
    throw UsageError("--normalize scales embeddings; rank pooling gives label scores");
  }
  if (*pooling == scoring::Pooling::rank && classifier == nullptr) {
    throw Error("--pooling rank needs a model with a classification head (cls.output.weight)");
  }
  const std::vector<TokenId> ids = prompt_ids(args, *model);
  Session session(model);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  std::vector<float> vector =
      scoring::pool_embeddings(session.embeddings(ids), n_embd, *pooling, args.has("normalize"));
  if (*pooling == scoring::Pooling::rank) vector = classifier->scores(vector, model->pool());
  if (args.has("json")) {
    JsonWriter json;
    json.begin_object();
    json.key("tokens").value(static_cast<int64_t>(ids.size()));
    json.key("dimensions").value(static_cast<int64_t>(vector.size()));
    json.key(*pooling == scoring::Pooling::rank ? "scores" : "embedding").begin_array();
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
