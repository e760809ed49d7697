// `cortiq inspect FILE [--json] [--full]`: a GGUF file's header, metadata,
// tensors and totals.
#include <cstdio>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/inspect_report.hpp"
#include "formats/gguf/gguf_file.hpp"

namespace cortiq::cli {

namespace {

ArgParser inspect_parser() {
  ArgParser parser("inspect", "FILE [--json] [--full]",
                   "Shows a GGUF file: version, alignment and splits; every metadata key with its\n"
                   "type and value; every tensor with its type, shape, size and offset; bytes per\n"
                   "weight type, the parameter count and the file size.");
  parser.positional("FILE", "a .gguf file (the first part of a split model opens all parts)")
      .flag("--json", "print JSON instead of text")
      .flag("--full", "show whole arrays and strings (default: first 8 items, first 80 bytes)")
      .option("--items", "N", "array items to show when abridged", "8");
  return parser;
}

}  // namespace

int run_inspect(std::span<const std::string> args) {
  const ArgParser parser = inspect_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  InspectOptions options;
  options.full = parsed->has("full");
  options.max_items = static_cast<size_t>(parsed->get_int("items", 0, 1'000'000));

  const gguf::GgufFile file = gguf::GgufFile::open(parsed->positional(0));
  const std::string report =
      parsed->has("json") ? inspect_json(file, options) : inspect_text(file, options);
  std::fwrite(report.data(), 1, report.size(), stdout);
  return 0;
}

}  // namespace cortiq::cli
