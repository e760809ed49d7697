// `cortiq logits -m FILE (--ids "1 2 3" | -p TEXT) -o OUT.f32 [-b CHUNK]`:
// the raw logits of every position as little-endian float32, row-major
// [n_tokens][n_vocab], and one line "pos id argmax" per position on stdout.
// Same interface as the peer's tool (../shared/peer/peer-logits), so the two
// outputs compare directly.
#include <cstdio>
#include <memory>

#include "base/error.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser logits_parser() {
  ArgParser parser("logits", "-m FILE (--ids \"1 2 3\" | -p TEXT) -o OUT.f32 [options]",
                   "Writes the logits of every position as raw little-endian float32,\n"
                   "[n_tokens][n_vocab] row-major, and prints \"pos id argmax\" per position.\n"
                   "--ids are used as given (no BOS added); -p is tokenized like `run`.");
  add_model_options(parser);
  parser.option("--ids", "\"1 2 3\"", "token ids, space or comma separated")
      .option("-p,--prompt", "TEXT", "text, tokenized with the model's BOS")
      .option("-o,--output", "OUT", "the .f32 file to write");
  return parser;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Lowest id among equal maxima, like greedy sampling.
size_t argmax(std::span<const float> row) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

}  // namespace

int run_logits(std::span<const std::string> argv) {
  const auto parsed = logits_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  if (args.has("ids") == args.has("prompt")) throw UsageError("give exactly one of --ids or -p");
  if (!args.has("output")) throw UsageError("missing -o OUT.f32");
  std::vector<TokenId> ids;
  if (args.has("ids")) ids = parse_ids(args.get("ids"), "--ids");
  // Without -c the context grows to hold every given id (as the peer's tool).
  const auto model = load_model_from(args, static_cast<int64_t>(ids.size()));
  if (!args.has("ids")) ids = model->tokenizer().encode(args.get("prompt"));
  if (ids.empty()) throw Error("no tokens");
  Session session(model);
  const auto logits = session.evaluate(ids, model->options().chunk_size);

  const std::string out_path = args.get("output");
  std::unique_ptr<std::FILE, FileCloser> out(std::fopen(out_path.c_str(), "wb"));
  if (!out) throw Error("cannot write " + out_path);
  if (std::fwrite(logits.data(), sizeof(float), logits.size(), out.get()) != logits.size() ||
      std::fclose(out.release()) != 0) {
    throw Error("error writing " + out_path);
  }
  const auto n_vocab = static_cast<size_t>(model->n_vocab());
  for (size_t pos = 0; pos < ids.size(); ++pos) {
    const auto row = std::span<const float>(logits).subspan(pos * n_vocab, n_vocab);
    std::printf("%zu %d %zu\n", pos, ids[pos], argmax(row));
  }
  return 0;
}

}  // namespace cortiq::cli
