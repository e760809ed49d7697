// `cortiq calibrate -m FILE (-f TEXT | --ids-file IDS) [-c CTX] [--chunks N]
// [--write OUT.gguf]`: confidence calibration over the positions perplexity
// scores (scoring/calibration.hpp); --write stores the fitted temperature
// as cortiq.calibration.temperature in a copy of the model.
#include <cstdio>

#include "base/error.hpp"
#include "base/thread_pool.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/scoring_args.hpp"
#include "cortiq/cortiq.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "scoring/calibration.hpp"
#include "scoring/perplexity.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser calibrate_parser() {
  ArgParser parser(
      "calibrate", "-m FILE (-f TEXT | --ids-file IDS) [options]",
      "Confidence calibration: at every position perplexity scores (the second half of\n"
      "each chunk of CTX tokens), is the model's most likely token the right one, and\n"
      "how probable did the model say it was? Prints a reliability table (10 bins),\n"
      "the expected calibration error and the temperature that minimises the NLL.\n"
      "--write OUT.gguf copies the model with that temperature stored as\n"
      "cortiq.calibration.temperature; generation's per-token confidence then uses it.");
  add_chunked_text_options(parser);
  parser.option("--write", "OUT", "write a copy of the model with the fitted temperature");
  return parser;
}

// The model file with one key added or replaced, tensors copied as they are.
void write_with_temperature(const gguf::GgufFile& file, const std::string& out,
                            double temperature) {
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : file.metadata()) writer.set(kv.key, kv.value);
  writer.set(std::string(kCalibrationTemperatureKey), gguf::Value(static_cast<float>(temperature)));
  for (const gguf::TensorInfo& t : file.tensors()) writer.add_tensor(t.name, t.type, t.shape);
  writer.begin(out);
  for (const gguf::TensorInfo& t : file.tensors()) writer.write_tensor_data(t.data);
  writer.finish();
}

}  // namespace

int run_calibrate(std::span<const std::string> argv) {
  const auto parsed = calibrate_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  if (args.has("file") == args.has("ids-file")) {
    throw UsageError("give exactly one of -f TEXT or --ids-file IDS");
  }
  const int64_t context = args.get_int("ctx", 4, int64_t{1} << 24);
  const auto model = load_model_from(args, context);
  const std::vector<TokenId> tokens = chunked_text_tokens(args, *model);
  const scoring::ChunkPlan plan =
      scoring::plan_chunks(*model, tokens, context, max_chunks_from(args));

  std::vector<scoring::CalibrationRow> rows;
  scoring::PerplexityOptions options;
  options.batch = args.get_int("chunk", 1, 1 << 16);
  options.on_rows = [&](const scoring::ScoredRows& scored) {
    const auto n_vocab = static_cast<size_t>(model->n_vocab());
    const size_t first = rows.size();
    rows.resize(first + scored.rows.size());
    model->pool().parallel_for(
        static_cast<int64_t>(scored.rows.size()), [&](int64_t begin, int64_t end) {
          for (auto r = static_cast<size_t>(begin); r < static_cast<size_t>(end); ++r) {
            rows[first + r] = scoring::compress_row(scored.logits.subspan(r * n_vocab, n_vocab),
                                                    scored.rows[r], scored.targets[r]);
          }
        });
  };
  options.on_chunk = [](const scoring::ChunkProgress& p) {
    std::fprintf(stderr, "calibrate: chunk %lld/%lld  PPL %.4f  %.1f tokens/s\n",
                 static_cast<long long>(p.done), static_cast<long long>(p.total),
                 p.nll.perplexity(), p.tokens_per_second());
  };
  Session session(model);
  scoring::perplexity(session, tokens, plan, options);
  const scoring::CalibrationReport report = scoring::calibrate(rows);
  std::printf("%s", scoring::format_calibration_report(report).c_str());
  if (args.has("write")) {
    write_with_temperature(model->file(), args.get("write"), report.temperature);
    std::printf("wrote %s with %s = %.6f\n", args.get("write").c_str(),
                std::string(kCalibrationTemperatureKey).c_str(), report.temperature);
  }
  return 0;
}

}  // namespace cortiq::cli
