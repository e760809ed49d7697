#include "cli/args.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::cli {

ArgParser::ArgParser(std::string command, std::string synopsis, std::string description)
    : command_(std::move(command)),
      synopsis_(std::move(synopsis)),
      description_(std::move(description)) {}

namespace {
void split_names(const std::string& names, std::string& short_name, std::string& long_name) {
  for (std::string_view part : split(names, ',')) {
    if (part.starts_with("--")) {
      long_name = std::string(part);
    } else {
      short_name = std::string(part);
    }
  }
}
}  // namespace

ArgParser& ArgParser::flag(const std::string& names, const std::string& help) {
  return option(names, "", help);
}

ArgParser& ArgParser::option(const std::string& names, const std::string& metavar,
                             const std::string& help, std::optional<std::string> default_value) {
  Option o;
  split_names(names, o.short_name, o.long_name);
  o.key = o.long_name.empty() ? o.short_name.substr(1) : o.long_name.substr(2);
  o.metavar = metavar;
  o.help = help;
  o.default_value = std::move(default_value);
  options_.push_back(std::move(o));
  return *this;
}

ArgParser& ArgParser::positional(const std::string& name, const std::string& help, bool required,
                                 bool variadic) {
  positionals_.push_back({name, help, required, variadic});
  return *this;
}

ArgParser& ArgParser::epilog(const std::string& text) {
  epilog_ = text;
  return *this;
}

const ArgParser::Option* ArgParser::find(const std::string& name) const {
  for (const Option& o : options_) {
    if (name == o.long_name || (!o.short_name.empty() && name == o.short_name)) return &o;
  }
  return nullptr;
}

std::string ArgParser::help() const {
  std::string h = "usage: cortiq " + command_ + " " + synopsis_ + "\n\n" + description_ + "\n";
  if (!positionals_.empty()) {
    h += "\narguments:\n";
    for (const Positional& p : positionals_) {
      h += strfmt("  %-24s %s\n", p.name.c_str(), p.help.c_str());
    }
  }
  h += "\noptions:\n";
  for (const Option& o : options_) {
    std::string names = o.short_name.empty() ? "    " : o.short_name + ", ";
    names += o.long_name;
    if (!o.metavar.empty()) names += " " + o.metavar;
    std::string text = o.help;
    if (o.default_value && !o.default_value->empty())
      text += " (default: " + *o.default_value + ")";
    h += strfmt("  %-24s %s\n", names.c_str(), text.c_str());
  }
  h += strfmt("  %-24s %s\n", "-h, --help", "show this help");
  if (!epilog_.empty()) h += "\n" + epilog_ + "\n";
  return h;
}

std::optional<ParsedArgs> ArgParser::parse(std::span<const std::string> args) const {
  ParsedArgs parsed;
  parsed.command_ = command_;
  for (const Option& o : options_) {
    if (o.default_value) parsed.defaults_[o.key] = *o.default_value;
  }
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_positionals && (a == "-h" || a == "--help")) {
      std::fputs(help().c_str(), stdout);
      return std::nullopt;
    }
    if (!only_positionals && a == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
      std::string name = a;
      std::optional<std::string> inline_value;
      if (const size_t eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
        name = a.substr(0, eq);
        inline_value = a.substr(eq + 1);
      }
      const Option* o = find(name);
      if (o == nullptr) {
        throw UsageError("unknown option " + name);
      }
      if (o->metavar.empty()) {
        if (inline_value) throw UsageError("option " + name + " takes no value");
        parsed.values_[o->key] =
            std::string(1, '1');  // not = "1": GCC 12 -Wrestrict false positive
        continue;
      }
      if (inline_value) {
        parsed.values_[o->key] = *inline_value;
      } else if (i + 1 < args.size()) {
        parsed.values_[o->key] = args[++i];
      } else {
        throw UsageError("option " + name + " needs a value (" + o->metavar + ")");
      }
      parsed.all_values_[o->key].push_back(parsed.values_[o->key]);
      continue;
    }
    parsed.positionals_.push_back(a);
  }
  size_t required = 0;
  bool variadic = false;
  for (const Positional& p : positionals_) {
    if (p.required) ++required;
    variadic |= p.variadic;
  }
  if (parsed.positionals_.size() < required) {
    throw UsageError("missing argument " + positionals_[parsed.positionals_.size()].name);
  }
  if (!variadic && parsed.positionals_.size() > positionals_.size()) {
    throw UsageError("unexpected argument '" + parsed.positionals_[positionals_.size()] + "'");
  }
  return parsed;
}

std::vector<std::string> ParsedArgs::get_all(const std::string& key) const {
  if (auto it = all_values_.find(key); it != all_values_.end()) return it->second;
  return {};
}

std::string ParsedArgs::get(const std::string& key) const {
  if (auto it = values_.find(key); it != values_.end()) return it->second;
  if (auto it = defaults_.find(key); it != defaults_.end()) return it->second;
  return {};
}

int64_t ParsedArgs::get_int(const std::string& key, int64_t min, int64_t max) const {
  const std::string text = get(key);
  int64_t v = 0;
  if (!parse_int64(text, v)) throw UsageError("--" + key + ": '" + text + "' is not an integer");
  if (v < min || v > max) {
    throw UsageError(strfmt("--%s: %lld is out of range [%lld, %lld]", key.c_str(),
                            static_cast<long long>(v), static_cast<long long>(min),
                            static_cast<long long>(max)));
  }
  return v;
}

double ParsedArgs::get_double(const std::string& key) const {
  const std::string text = get(key);
  double v = 0;
  if (!parse_double(text, v)) throw UsageError("--" + key + ": '" + text + "' is not a number");
  return v;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": error reading");
  return text.str();
}

}  // namespace cortiq::cli
