// `cortiq convert llama2c IN.bin OUT.gguf [--type T] [--name NAME] [--tokenizer FILE]`:
// imports a model from another format into GGUF.
#include <cstdio>

#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/progress_bar.hpp"
#include "convert/llama2c/llama2c_to_gguf.hpp"

namespace cortiq::cli {

namespace {

ArgParser convert_parser() {
  ArgParser parser(
      "convert", "llama2c IN.bin OUT.gguf [--type T] [--name NAME] [--tokenizer FILE]",
      "Imports a model into a GGUF file that cortiq and llama.cpp run.\n\n"
      "llama2c: a checkpoint of Karpathy's llama2.c (the legacy format of the published\n"
      "stories*.bin files, or export.py --version 1) becomes architecture llama with\n"
      "the same float32 weights (or quantized with --type), RMS eps 1e-5, RoPE base\n"
      "10000 on interleaved pairs, context = the checkpoint's seq_len. The checkpoint\n"
      "holds no tokenizer: without --tokenizer the model works with token ids only\n"
      "(BOS = 1, EOS = 2).");
  parser.positional("FORMAT", "the source format: llama2c")
      .positional("IN", "the checkpoint to read")
      .positional("OUT.gguf", "where to write (a temporary file is renamed into place)")
      .option("--type", "T",
              "weight type or recipe, as for 'cortiq quantize' (F32, F16, Q8_0, Q4_K_M...)", "F32")
      .flag("--pure", "give every matrix exactly --type (no llama.cpp mixture)")
      .option("--name", "TEXT", "general.name (default: IN's file name without extension)")
      .option("--tokenizer", "FILE",
              "llama2.c tokenizer.bin of the model: writes a SentencePiece vocabulary")
      .option("-t,--threads", "N", "worker threads for quantization", "all cores");
  return parser;
}

int thread_count(const ParsedArgs& args) {
  if (!args.has("threads")) return 0;
  return static_cast<int>(args.get_int("threads", 1, 1024));
}

int convert_llama2c(const ParsedArgs& args) {
  const std::string& input = args.positional(1);
  const std::string& output = args.positional(2);
  llama2c::ConvertOptions options;
  const std::string type_name = args.get("type");
  options.recipe = find_quant_recipe(type_name);
  if (options.recipe == nullptr) {
    throw UsageError("unknown type or recipe '" + type_name +
                     "' (see 'cortiq quantize --help' for the list)");
  }
  options.pure = args.has("pure");
  options.name = args.get("name");
  options.tokenizer = args.get("tokenizer");
  options.n_threads = thread_count(args);
  ProgressBar bar;
  options.on_progress = [&bar](const llama2c::ConvertProgress& p) {
    bar.update(p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total, p.seconds);
  };
  const llama2c::Checkpoint checkpoint = llama2c::Checkpoint::open(input);
  const llama2c::ConvertSummary s = llama2c::convert_to_gguf(checkpoint, output, options);
  bar.finish();
  const ModelGeometry& g = s.geometry;
  std::fprintf(stderr,
               "wrote %s: llama, %zu tensors, %s parameters (dim %lld, %lld layers, %lld heads, "
               "%lld KV heads, ff %lld, vocab %lld%s, ctx %lld), %s%s, %s -> %s in %.2f s\n",
               output.c_str(), s.n_tensors, with_commas(s.n_parameters).c_str(),
               static_cast<long long>(g.n_embd), static_cast<long long>(g.n_layer),
               static_cast<long long>(g.n_head), static_cast<long long>(g.n_head_kv),
               static_cast<long long>(g.n_ff), static_cast<long long>(g.n_vocab),
               s.has_vocab ? "" : ", ids only", static_cast<long long>(g.n_ctx),
               std::string(options.recipe->name).c_str(), options.pure ? " (pure)" : "",
               human_bytes(s.input_bytes).c_str(), human_bytes(s.output_bytes).c_str(), s.seconds);
  return 0;
}

}  // namespace

int run_convert(std::span<const std::string> args) {
  const ArgParser parser = convert_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  const std::string& format = parsed->positional(0);
  if (format == "llama2c") return convert_llama2c(*parsed);
  throw UsageError("unknown source format '" + format + "' (known: llama2c)");
}

}  // namespace cortiq::cli
