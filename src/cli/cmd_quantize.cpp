// `cortiq quantize IN.gguf OUT.gguf TYPE [--pure] [--threads N]`: converts a
// model's weights to another type or recipe (see docs/quantization.md).
#include <cstdio>

#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/progress_bar.hpp"
#include "quant/quant_recipe.hpp"
#include "quant/quantize_model.hpp"

namespace cortiq::cli {

namespace {

std::string recipe_list() {
  std::string text = "types and recipes (general.file_type in brackets):\n";
  for (const QuantRecipe& r : quant_recipes()) {
    text += strfmt("  %-8s [%2u] %s\n", std::string(r.name).c_str(), r.file_type,
                   std::string(r.description).c_str());
  }
  text +=
      "  Q3_K, Q4_K, Q5_K stand for Q3_K_M, Q4_K_M, Q5_K_M (with --pure: every matrix that type).\n"
      "1-D tensors (norms, biases) and a few small 2-D tables (routers, position embeddings)\n"
      "keep their type. Details: docs/quantization.md.";
  return text;
}

ArgParser quantize_parser() {
  ArgParser parser("quantize", "IN.gguf OUT.gguf TYPE [--pure] [--threads N]",
                   "Converts the weights of a GGUF model to TYPE: a weight type, or a recipe that\n"
                   "mixes types per tensor as llama.cpp does (more bits for the output matrix and\n"
                   "for attn_v/ffn_down on some layers). Inputs of any decodable type are\n"
                   "dequantized first; metadata is copied.");
  parser.positional("IN.gguf", "the model to read")
      .positional("OUT.gguf", "where to write (a temporary file is renamed into place)")
      .positional("TYPE", "weight type or recipe, e.g. Q8_0, Q4_K_M, F16")
      .flag("--pure", "give every quantizable tensor exactly TYPE (no mixture)")
      .option("-t,--threads", "N", "worker threads", "all cores")
      .epilog(recipe_list());
  return parser;
}

int thread_count(const ParsedArgs& args) {
  if (!args.has("threads")) return 0;
  return static_cast<int>(args.get_int("threads", 1, 1024));
}

void print_summary(const QuantizeSummary& s, const QuantRecipe& recipe, bool pure) {
  std::fprintf(stderr, "quantized %zu tensors (%zu converted", s.n_tensors, s.n_converted);
  if (s.n_fallbacks != 0) std::fprintf(stderr, ", %zu fell back to another type", s.n_fallbacks);
  std::fprintf(stderr, ") to %s%s: %s -> %s in %.2f s\n", std::string(recipe.name).c_str(),
               pure ? " (pure)" : "", human_bytes(s.input_bytes).c_str(),
               human_bytes(s.output_bytes).c_str(), s.seconds);
}

}  // namespace

int run_quantize(std::span<const std::string> args) {
  const ArgParser parser = quantize_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  const std::string& type_name = parsed->positional(2);
  const QuantRecipe* recipe = find_quant_recipe(type_name);
  if (recipe == nullptr) {
    throw UsageError("unknown type or recipe '" + type_name + "' (see --help for the list)");
  }
  QuantizeOptions options;
  options.pure = parsed->has("pure");
  options.n_threads = thread_count(*parsed);
  ProgressBar bar;
  options.on_progress = [&bar](const QuantizeProgress& p) {
    bar.update(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total, p.seconds);
  };
  const QuantizeSummary summary =
      quantize_model(parsed->positional(0), parsed->positional(1), *recipe, options);
  bar.finish();
  print_summary(summary, *recipe, options.pure);
  return 0;
}

}  // namespace cortiq::cli
