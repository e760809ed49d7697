// `cortiq chat -m FILE [--system TEXT]`: an interactive conversation. Each
// turn renders the whole conversation with the model's chat template; the
// session reuses the cached history, so only the new turn is prefilled.
// Ctrl-C stops the current reply (not the program); /reset starts over;
// /exit (or end of input) quits.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>

#include "base/json_writer.hpp"
#include "base/log.hpp"
#include "chat/chat_template.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "model/hparams.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser chat_parser() {
  ArgParser parser("chat", "-m FILE [--system TEXT] [options]",
                   "An interactive chat with the model's chat template (ChatML when the file has\n"
                   "none). Type a message and press Enter. Ctrl-C stops the current reply;\n"
                   "/reset forgets the conversation; /exit or end of input quits.");
  add_model_options(parser);
  parser.option("--system", "TEXT", "a system message that starts the conversation")
      .option("-n,--max-tokens", "N", "at most N tokens per reply (-1: no limit)", "-1");
  add_sampling_options(parser);
  add_grammar_options(parser);
  add_speculative_options(parser);
  return parser;
}

struct Message {
  std::string role;
  std::string content;
};

std::string messages_json(const std::vector<Message>& messages) {
  JsonWriter json;
  json.begin_array();
  for (const auto& m : messages) {
    json.begin_object().key("role").value(m.role).key("content").value(m.content).end_object();
  }
  json.end_array();
  return json.take();
}

std::atomic<Session*> g_generating{nullptr};

// During a reply Ctrl-C cancels it; at the prompt it ends the program.
extern "C" void chat_on_interrupt(int) {
  if (Session* s = g_generating.load()) {
    s->cancel();
  } else {
    std::_Exit(130);
  }
}

// Points the Ctrl-C handler at the session for the length of one reply,
// whatever way the reply ends.
class GeneratingGuard {
 public:
  explicit GeneratingGuard(Session& session) { g_generating.store(&session); }
  ~GeneratingGuard() { g_generating.store(nullptr); }
  GeneratingGuard(const GeneratingGuard&) = delete;
  GeneratingGuard& operator=(const GeneratingGuard&) = delete;
};

class Chat {
 public:
  Chat(std::shared_ptr<const Model> model, const ParsedArgs& args)
      : model_(std::move(model)), session_(model_), tmpl_(template_source()) {
    options_.sampling = sampling_from(args, model_->n_vocab());
    options_.max_tokens = args.get_int("max-tokens", -1, INT64_MAX);
    options_.speculative = speculative_from(args, model_);
    options_.grammar = grammar_from(args);  // every reply follows it
    options_.parse_special = true;
    if (args.has("system")) system_ = args.get("system");
    reset();
  }

  void reset() {
    messages_.clear();
    if (system_) messages_.push_back({"system", *system_});
  }

  // One user turn: render, generate (streamed), remember the reply. A turn
  // that cannot run (the conversation no longer fits the context, a template
  // error) is dropped with a message; the conversation goes on.
  void turn(const std::string& user_text) {
    messages_.push_back({"user", user_text});
    try {
      reply();
    } catch (const Error& e) {
      messages_.pop_back();
      std::fprintf(stderr, "[turn dropped: %s — /reset starts a new conversation]\n", e.what());
    }
  }

 private:
  void reply() {
    const std::string prompt = render();
    // The template usually writes the BOS text itself; do not add a second.
    const auto& vocab = model_->tokenizer().vocab();
    const std::string_view bos = vocab.token_text(vocab.bos);
    options_.add_special = bos.empty() || prompt.rfind(bos, 0) != 0;
    const GeneratingGuard guard(session_);
    const auto result = session_.generate(prompt, options_, [](std::string_view piece, TokenId) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("\n");
    if (result.finish_reason == FinishReason::cancelled) std::fprintf(stderr, "[stopped]\n");
    LOG_DEBUG(
        "turn: prompt %lld tokens (%lld cached), %lld generated, %.1f tokens/s",
        static_cast<long long>(result.prompt_tokens), static_cast<long long>(result.cached_tokens),
        static_cast<long long>(result.generated_tokens), result.timings.decode_tokens_per_second());
    if (options_.speculative.drafter) {
      LOG_DEBUG("speculative: %s", speculative_text(result.speculative).c_str());
    }
    messages_.push_back({"assistant", result.text});
  }

  std::string template_source() const {
    std::string source = model_->chat_template();
    if (source.empty()) {
      LOG_WARN("the model has no chat template; using ChatML");
      source = std::string(chatml_template());
    }
    return source;
  }

  std::string render() const {
    const auto& vocab = model_->tokenizer().vocab();
    ChatInputs in;
    in.messages = messages_from_json(messages_json(messages_));
    in.add_generation_prompt = true;
    in.bos_token = vocab.token_text(vocab.bos);
    in.eos_token = vocab.token_text(vocab.eos);
    return tmpl_.render(in);
  }

  std::shared_ptr<const Model> model_;
  Session session_;
  ChatTemplate tmpl_;
  GenerateOptions options_;
  std::optional<std::string> system_;
  std::vector<Message> messages_;
};

}  // namespace

int run_chat(std::span<const std::string> argv) {
  const auto parsed = chat_parser().parse(argv);
  if (!parsed) return 0;
  const auto model = load_model_from(*parsed);
  if (model->tokenizer().vocab().kind == TokenizerKind::none) {
    throw Error("this model has no tokenizer (no_vocab); use `cortiq run --ids`");
  }
  // Refused before the first turn, not turn after turn.
  if (model->hparams().encoder) {
    throw Error(model->hparams().arch +
                " is a text encoder (embeddings): it has no output layer to chat with; use "
                "`cortiq embed`");
  }
  Chat chat(model, *parsed);
  std::signal(SIGINT, chat_on_interrupt);
  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::string line;
  for (;;) {
    if (interactive) std::fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      chat.reset();
      std::fputs("[conversation reset]\n", stderr);
      continue;
    }
    if (line.empty()) continue;
    chat.turn(line);
  }
  std::signal(SIGINT, SIG_DFL);
  return 0;
}

}  // namespace cortiq::cli
