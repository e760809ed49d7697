// `cortiq run -m FILE -p TEXT [-n N] [sampling] [--stop S] [--json]`:
// generate a continuation, streamed to stdout as it is produced; load time
// and prefill/decode speed go to stderr.
#include <atomic>
#include <csignal>
#include <cstdio>

#include "base/json_writer.hpp"
#include "base/log.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"

namespace cortiq::cli {

namespace {

ArgParser run_parser() {
  ArgParser parser("run", "-m FILE (-p TEXT | --ids \"1 2 3\") [options]",
                   "Generates text after a prompt and streams it to stdout. Greedy with --temp 0;\n"
                   "the same --seed gives the same text.");
  add_model_options(parser);
  parser.option("-p,--prompt", "TEXT", "the prompt")
      .option("--ids", "\"1 2 3\"", "the prompt as token ids, used as given (no BOS added)")
      .option("-n,--max-tokens", "N",
              "stop after N generated tokens (-1: until the context is full)", "-1")
      .option("--stop", "S", "stop when the text contains S, which is not printed (repeatable)")
      .flag("--ignore-eos", "keep going past end-of-generation tokens")
      .flag("--loop-stop", "stop when the output starts repeating itself (finish_reason loop)")
      .flag("--no-bos", "do not add the BOS token the model adds by default")
      .flag("--no-special", "treat <|...|> special-token text in the prompt as plain text")
      .flag("--confidence", "with --json: the probability of every generated token")
      .flag("--json", "print the result object (ids, text, finish_reason, timings) instead");
  add_sampling_options(parser);
  add_grammar_options(parser);
  add_speculative_options(parser);
  return parser;
}

void print_json(const GenerateResult& r, bool confidence) {
  JsonWriter json;
  json.begin_object();
  json.key("text").value(r.text);
  json.key("ids").begin_array();
  for (const TokenId id : r.tokens) json.value(static_cast<int64_t>(id));
  json.end_array();
  json.key("prompt_tokens").value(r.prompt_tokens);
  json.key("cached_tokens").value(r.cached_tokens);
  json.key("generated_tokens").value(r.generated_tokens);
  json.key("finish_reason").value(std::string(finish_reason_name(r.finish_reason)));
  if (confidence) {
    json.key("confidence").begin_array();
    for (const float c : r.confidence) json.value(static_cast<double>(c));
    json.end_array();
  }
  json.key("timings").begin_object();
  json.key("prefill_tokens").value(r.timings.prefill_tokens);
  json.key("prefill_seconds").value(r.timings.prefill_seconds);
  json.key("prefill_tokens_per_second").value(r.timings.prefill_tokens_per_second());
  json.key("decode_tokens").value(r.timings.decode_tokens);
  json.key("decode_seconds").value(r.timings.decode_seconds);
  json.key("decode_tokens_per_second").value(r.timings.decode_tokens_per_second());
  json.end_object();
  json.key("speculative").begin_object();
  json.key("passes").value(r.speculative.passes);
  json.key("drafted").value(r.speculative.drafted);
  json.key("accepted").value(r.speculative.accepted);
  json.key("acceptance_rate").value(r.speculative.acceptance_rate());
  json.key("mean_accepted_length").value(r.speculative.mean_accepted_length());
  json.end_object();
  json.end_object();
  std::printf("%s\n", json.text().c_str());
}

std::atomic<Session*> g_session{nullptr};

// Ctrl-C stops the generation cooperatively; the result is still printed.
extern "C" void run_on_interrupt(int) {
  if (Session* s = g_session.load()) s->cancel();
}

// Ctrl-C cancels this session while the guard lives; the default action
// comes back however the command ends.
class InterruptGuard {
 public:
  explicit InterruptGuard(Session& session) {
    g_session.store(&session);
    std::signal(SIGINT, run_on_interrupt);
  }
  ~InterruptGuard() {
    std::signal(SIGINT, SIG_DFL);
    g_session.store(nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

}  // namespace

int run_run(std::span<const std::string> argv) {
  const auto parsed = run_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  if (args.has("prompt") == args.has("ids")) throw UsageError("give exactly one of -p or --ids");
  const auto model = load_model_from(args);

  GenerateOptions options;
  options.sampling = sampling_from(args, model->n_vocab());
  options.max_tokens = args.get_int("max-tokens", -1, INT64_MAX);
  options.stop = args.get_all("stop");
  options.ignore_eos = args.has("ignore-eos");
  options.loop_stop = args.has("loop-stop");
  options.add_special = !args.has("no-bos");
  options.parse_special = !args.has("no-special");
  const bool json = args.has("json");
  options.confidence = json && args.has("confidence");
  options.speculative = speculative_from(args, model);
  options.grammar = grammar_from(args);

  Session session(model);
  const InterruptGuard interrupts(session);
  const auto stream = [&](std::string_view piece, TokenId) {
    if (!json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  GenerateResult result;
  if (args.has("ids")) {
    const auto ids = parse_ids(args.get("ids"), "--ids");
    result = session.generate(std::span<const TokenId>(ids), options, stream);
  } else {
    result = session.generate(args.get("prompt"), options, stream);
  }
  if (json) {
    print_json(result, options.confidence);
  } else {
    std::printf("\n");
  }
  LOG_INFO("prompt %lld tokens (%.1f tokens/s), generated %lld tokens (%.1f tokens/s), %s",
           static_cast<long long>(result.prompt_tokens), result.timings.prefill_tokens_per_second(),
           static_cast<long long>(result.generated_tokens),
           result.timings.decode_tokens_per_second(),
           std::string(finish_reason_name(result.finish_reason)).c_str());
  if (options.speculative.drafter) {
    LOG_INFO("speculative: %s", speculative_text(result.speculative).c_str());
  }
  return 0;
}

}  // namespace cortiq::cli
