// `cortiq perplexity -m FILE (-f TEXT | --ids-file IDS) [-c CTX] [-b BATCH]
// [--chunks N] [--save-logits FILE]` and `cortiq perplexity -m FILE
// --kl-divergence FILE`: llama-perplexity's method and output (chunks.hpp),
// its log-probability files (log_prob_file.hpp) and its KL statistics.
#include <cstdio>
#include <optional>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/scoring_args.hpp"
#include "cortiq/cortiq.hpp"
#include "scoring/kl_divergence.hpp"
#include "scoring/log_prob_file.hpp"
#include "scoring/perplexity.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser perplexity_parser() {
  ArgParser parser(
      "perplexity", "-m FILE (-f TEXT | --ids-file IDS | --kl-divergence BASE) [options]",
      "Perplexity as llama-perplexity computes it: the text tokenized once (with BOS),\n"
      "cut into chunks of CTX tokens, each evaluated from an empty cache with BOS\n"
      "first, the second half of each scored. Prints the running estimate per chunk\n"
      "and `Final estimate: PPL = x +/- err`.\n"
      "--save-logits writes the scored log-probabilities (llama.cpp's\n"
      "--kl-divergence-base format); --kl-divergence reads such a file (its tokens and\n"
      "context) and reports how far this model's distributions are from it.");
  add_chunked_text_options(parser);
  parser.option("--save-logits", "FILE", "write the scored log-probabilities to FILE")
      .option("--kl-divergence", "FILE", "compare with the log-probabilities saved in FILE");
  return parser;
}

// One line per chunk on stderr: progress, running PPL, speed, time left.
void report_progress(const scoring::ChunkProgress& p) {
  const double eta =
      p.done > 0 ? p.seconds / static_cast<double>(p.done) * static_cast<double>(p.total - p.done)
                 : 0.0;
  std::fprintf(stderr, "perplexity: chunk %lld/%lld  PPL %.4f  %.1f tokens/s  %.1f s, ETA %.1f s\n",
               static_cast<long long>(p.done), static_cast<long long>(p.total), p.nll.perplexity(),
               p.tokens_per_second(), p.seconds, eta);
}

int run_plain(const ParsedArgs& args, const std::shared_ptr<const Model>& model, int64_t context) {
  const std::vector<TokenId> tokens = chunked_text_tokens(args, *model);
  const scoring::ChunkPlan plan =
      scoring::plan_chunks(*model, tokens, context, max_chunks_from(args));
  std::optional<scoring::LogProbWriter> writer;
  if (args.has("save-logits")) {
    writer.emplace(args.get("save-logits"),
                   scoring::LogProbHeader{plan.context, model->n_vocab(), plan.n_chunks}, tokens);
  }
  std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, %lld scored per chunk\n",
               tokens.size(), static_cast<long long>(plan.n_chunks),
               static_cast<long long>(plan.context),
               static_cast<long long>(plan.scored_per_chunk()));
  Session session(model);
  scoring::PerplexityOptions options;
  options.batch = args.get_int("chunk", 1, 1 << 16);
  options.on_chunk = [](const scoring::ChunkProgress& p) {
    report_progress(p);
    std::printf("[%lld]%.4f,", static_cast<long long>(p.done), p.nll.perplexity());
    std::fflush(stdout);
  };
  if (writer) {
    options.on_rows = [&](const scoring::ScoredRows& rows) {
      writer->write_chunk(rows.logits, rows.rows);
    };
  }
  const scoring::ChunkProgress result = scoring::perplexity(session, tokens, plan, options);
  if (writer) writer->close();
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", result.nll.perplexity(),
              result.nll.perplexity_error());
  std::fprintf(stderr, "perplexity: %lld tokens scored, %lld evaluated in %.2f s (%.1f tokens/s)\n",
               static_cast<long long>(result.nll.count),
               static_cast<long long>(result.tokens_evaluated), result.seconds,
               result.tokens_per_second());
  return 0;
}

int run_kl_divergence(const ParsedArgs& args, const std::shared_ptr<const Model>& model,
                      scoring::LogProbReader& base) {
  const scoring::LogProbHeader& header = base.header();
  const int64_t max_chunks = args.has("chunks") ? max_chunks_from(args) : header.n_chunks;
  const scoring::ChunkPlan plan =
      scoring::plan_chunks(*model, base.tokens(), header.n_ctx, max_chunks);
  Session session(model);
  scoring::KlStats stats;
  scoring::PerplexityOptions options;
  options.batch = args.get_int("chunk", 1, 1 << 16);
  options.on_chunk = report_progress;
  options.on_rows = [&](const scoring::ScoredRows& rows) {
    const std::vector<scoring::LogProbRow> base_rows = base.read_chunk();
    const auto n_vocab = static_cast<size_t>(model->n_vocab());
    for (size_t r = 0; r < rows.rows.size(); ++r) {
      stats.add(scoring::compare_position(rows.logits.subspan(r * n_vocab, n_vocab), rows.rows[r],
                                          base_rows[r], rows.targets[r]));
    }
    if (rows.chunk == 0) {
      std::printf(
          "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence"
          "              Δp RMS            Same top p\n");
    }
    const scoring::KlSummary s = stats.running();
    std::printf(
        "%4lld    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%"
        "    %6.3f ± %6.3f %%\n",
        static_cast<long long>(rows.chunk + 1), s.ppl.value, s.ppl.error, s.log_ppl_ratio.value,
        s.log_ppl_ratio.error, s.kld.value, s.kld.error, 100.0 * s.p_diff_rms.value,
        100.0 * s.p_diff_rms.error, 100.0 * s.same_top.value, 100.0 * s.same_top.error);
    std::fflush(stdout);
  };
  scoring::perplexity(session, base.tokens(), plan, options);
  std::printf("\n%s", scoring::format_kl_report(stats.summary()).c_str());
  return 0;
}

}  // namespace

int run_perplexity(std::span<const std::string> argv) {
  const auto parsed = perplexity_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  const int inputs = args.has("file") + args.has("ids-file") + args.has("kl-divergence");
  if (inputs != 1) throw UsageError("give exactly one of -f TEXT, --ids-file IDS, --kl-divergence");
  if (args.has("save-logits") && args.has("kl-divergence")) {
    throw UsageError("--save-logits and --kl-divergence do not go together");
  }
  // The baseline is checked before the model loads; its context wins.
  std::optional<scoring::LogProbReader> base;
  int64_t context = args.get_int("ctx", 4, int64_t{1} << 24);
  if (args.has("kl-divergence")) {
    base.emplace(args.get("kl-divergence"));
    if (args.has("ctx") && args.get_int("ctx", 4, int64_t{1} << 24) != base->header().n_ctx) {
      throw UsageError(strfmt("-c %s differs from the context %lld the baseline was scored with",
                              args.get("ctx").c_str(),
                              static_cast<long long>(base->header().n_ctx)));
    }
    context = base->header().n_ctx;
  }
  // The session's cache holds at least one chunk.
  const auto model = load_model_from(args, context);
  if (base && base->header().n_vocab != model->n_vocab()) {
    throw Error(strfmt("%s was saved for a vocabulary of %lld tokens; this model has %lld",
                       args.get("kl-divergence").c_str(),
                       static_cast<long long>(base->header().n_vocab),
                       static_cast<long long>(model->n_vocab())));
  }
  return base ? run_kl_divergence(args, model, *base) : run_plain(args, model, context);
}

}  // namespace cortiq::cli
