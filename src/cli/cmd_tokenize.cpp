// `cortiq tokenize -m FILE [--ids|--pieces|--json] [--no-bos] [--special] TEXT`
// (or -f FILE): the token ids of a text under a model's tokenizer, as the
// model would see them.
#include <cstdio>

#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser tokenize_parser() {
  ArgParser parser("tokenize",
                   "-m FILE [--ids|--pieces|--json] [--no-bos] [--special] TEXT | -f FILE",
                   "Turns text into token ids with the tokenizer stored in a GGUF model file.\n"
                   "Prints one line per token: the id and the text it stands for.");
  parser.option("-m,--model", "FILE", "a .gguf model (or vocabulary-only) file")
      .option("-f,--file", "FILE", "read the text from this file (bytes as they are)")
      .flag("--ids", "print only the ids, space-separated, on one line")
      .flag("--pieces", "print the vocabulary strings of the tokens, one per line")
      .flag("--json", "print {\"ids\": [...], \"pieces\": [...]}")
      .flag("--no-bos", "do not add the BOS/EOS tokens the model adds by default")
      .flag("--special", "match special tokens (<s>, <|im_end|>, ...) written in the text")
      .positional("TEXT", "the text to tokenize (unless -f is given)", /*required=*/false);
  return parser;
}

std::string render(const Tokenizer& tok, const std::vector<TokenId>& ids, const ParsedArgs& args) {
  std::string out;
  if (args.has("json")) {
    JsonWriter json;
    json.begin_object().key("ids").begin_array();
    for (TokenId id : ids) json.value(id);
    json.end_array().key("pieces").begin_array();
    for (TokenId id : ids) json.value(tok.token_to_piece(id, /*render_special=*/true));
    json.end_array().end_object();
    return json.take() + "\n";
  }
  if (args.has("ids")) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ' ';
      out += std::to_string(ids[i]);
    }
    return out + "\n";
  }
  for (TokenId id : ids) {
    if (args.has("pieces")) {
      out += escape_piece(tok.vocab().tokens[id]) + "\n";
    } else {
      out += strfmt("%6d '%s'\n", id, escape_piece(tok.token_to_piece(id, true)).c_str());
    }
  }
  return out;
}

}  // namespace

int run_tokenize(std::span<const std::string> args) {
  const ArgParser parser = tokenize_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  if (!parsed->has("model")) throw UsageError("missing -m FILE (the model whose tokenizer to use)");
  const int formats = parsed->has("ids") + parsed->has("pieces") + parsed->has("json");
  if (formats > 1) throw UsageError("--ids, --pieces and --json exclude each other");
  const bool from_file = parsed->has("file");
  if (from_file == !parsed->positionals().empty()) {
    throw UsageError("give either TEXT or -f FILE");
  }
  const std::string text = from_file ? read_text_file(parsed->get("file")) : parsed->positional(0);

  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(parsed->get("model")));
  const std::vector<TokenId> ids = tok.encode(
      text, {.add_special = !parsed->has("no-bos"), .parse_special = parsed->has("special")});
  const std::string out = render(tok, ids, *parsed);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace cortiq::cli
