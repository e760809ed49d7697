// A small declarative command-line parser shared by every subcommand:
// options are declared with their help text, so `cortiq CMD --help` and the
// error messages come from the same table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace cortiq::cli {

// A mistake on the command line; main() prints it with a hint and exits 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

class ParsedArgs;

class ArgParser {
 public:
  // `command` is e.g. "inspect"; `synopsis` the argument pattern after it.
  ArgParser(std::string command, std::string synopsis, std::string description);

  // names: "--json" or "-t,--threads". The canonical key is the long name
  // without dashes ("threads").
  ArgParser& flag(const std::string& names, const std::string& help);
  ArgParser& option(const std::string& names, const std::string& metavar, const std::string& help,
                    std::optional<std::string> default_value = std::nullopt);
  // Positional arguments in order; a variadic one takes the rest.
  ArgParser& positional(const std::string& name, const std::string& help, bool required = true,
                        bool variadic = false);
  ArgParser& epilog(const std::string& text);

  // Returns nullopt when --help was asked (the help is printed already).
  std::optional<ParsedArgs> parse(std::span<const std::string> args) const;
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Option {
    std::string short_name;  // "-t" or empty
    std::string long_name;   // "--threads"
    std::string key;         // "threads"
    std::string metavar;     // empty for flags
    std::string help;
    std::optional<std::string> default_value;
  };
  struct Positional {
    std::string name;
    std::string help;
    bool required;
    bool variadic;
  };
  const Option* find(const std::string& name) const;

  std::string command_;
  std::string synopsis_;
  std::string description_;
  std::string epilog_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
};

class ParsedArgs {
 public:
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // The option's value, its default, or "" when neither.
  std::string get(const std::string& key) const;
  // Every value of an option given several times, in order (not the default).
  std::vector<std::string> get_all(const std::string& key) const;
  // Integer option in [min, max]; throws UsageError naming the option.
  int64_t get_int(const std::string& key, int64_t min, int64_t max) const;
  double get_double(const std::string& key) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  // Named positional (first declared = index 0).
  const std::string& positional(size_t index) const { return positionals_.at(index); }

 private:
  friend class ArgParser;
  std::string command_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::map<std::string, std::string> defaults_;
  std::vector<std::string> positionals_;
};

// The whole file as bytes; throws cortiq::Error naming it when it cannot be
// read (input files of commands: -f TEXT, --messages-file, --ids-file).
std::string read_text_file(const std::string& path);

}  // namespace cortiq::cli
