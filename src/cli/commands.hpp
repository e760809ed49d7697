// The table of `cortiq` subcommands. Each command lives in its own
// cmd_NAME.cpp and declares its options with cli::ArgParser.
#pragma once

#include <span>
#include <string>

namespace cortiq::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(std::span<const std::string> args);  // args after the command name
};

std::span<const Command> commands();

int run_run(std::span<const std::string> args);
int run_chat(std::span<const std::string> args);
int run_serve(std::span<const std::string> args);
int run_logits(std::span<const std::string> args);
int run_perplexity(std::span<const std::string> args);
int run_calibrate(std::span<const std::string> args);
int run_explain(std::span<const std::string> args);
int run_embed(std::span<const std::string> args);
int run_bench(std::span<const std::string> args);
int run_inspect(std::span<const std::string> args);
int run_quantize(std::span<const std::string> args);
int run_gen_model(std::span<const std::string> args);
int run_convert(std::span<const std::string> args);
int run_template(std::span<const std::string> args);
int run_tokenize(std::span<const std::string> args);
int run_detokenize(std::span<const std::string> args);

}  // namespace cortiq::cli
