// `cortiq template -m FILE --messages JSON [--add-generation-prompt]`: the
// prompt a model's chat template makes of a conversation.
#include <cstdio>

#include "base/log.hpp"
#include "chat/chat_template.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::cli {

namespace {

ArgParser template_parser() {
  ArgParser parser(
      "template", "-m FILE (--messages JSON | --messages-file F) [options]",
      "Renders a conversation with the model's chat template (tokenizer.chat_template,\n"
      "run as Hugging Face transformers runs it) and prints the prompt. A model\n"
      "without a template gets ChatML, with a warning.");
  parser.option("-m,--model", "FILE", "a .gguf model (or vocabulary-only) file")
      .option("--messages", "JSON",
              "the messages: [{\"role\": \"user\", \"content\": \"Hi\"}, ...]")
      .option("--messages-file", "F", "read the messages JSON from a file")
      .option("--tools", "JSON", "tool definitions (a JSON list), passed as `tools`")
      .option("--kwargs", "JSON", "extra template variables, e.g. '{\"enable_thinking\": false}'")
      .flag("--add-generation-prompt", "end with the opening of the assistant's turn");
  return parser;
}

ChatInputs inputs_from(const ParsedArgs& args, const Vocab& vocab) {
  ChatInputs in;
  if (args.has("messages") == args.has("messages-file")) {
    throw UsageError("give the conversation with exactly one of --messages and --messages-file");
  }
  const std::string json =
      args.has("messages") ? args.get("messages") : read_text_file(args.get("messages-file"));
  in.messages = messages_from_json(json);
  if (!in.messages.is_list()) throw UsageError("--messages: expected a JSON list of messages");
  if (args.has("tools")) in.tools = messages_from_json(args.get("tools"));
  if (args.has("kwargs")) {
    const jinja::Value kwargs = messages_from_json(args.get("kwargs"));
    if (!kwargs.is_dict()) throw UsageError("--kwargs: expected a JSON object");
    for (const auto& [key, value] : kwargs.as_dict().items) {
      in.extra.emplace_back(key.as_string(), value);
    }
  }
  in.add_generation_prompt = args.has("add-generation-prompt");
  in.bos_token = vocab.token_text(vocab.bos);
  in.eos_token = vocab.token_text(vocab.eos);
  return in;
}

}  // namespace

int run_template(std::span<const std::string> args) {
  const ArgParser parser = template_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  if (!parsed->has("model")) throw UsageError("missing -m FILE (the model whose template to use)");
  const gguf::GgufFile file = gguf::GgufFile::open(parsed->get("model"));
  const Vocab vocab = Vocab::from_gguf(file);
  std::optional<std::string> source = file.get_string("tokenizer.chat_template");
  if (!source) {
    LOG_WARN("%s has no tokenizer.chat_template; using ChatML", parsed->get("model").c_str());
    source = std::string(chatml_template());
  }
  const std::string prompt = ChatTemplate(*source).render(inputs_from(*parsed, vocab));
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace cortiq::cli
