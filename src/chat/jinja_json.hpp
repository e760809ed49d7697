// Bridges between template values and JSON: Python's json.dumps (what
// Hugging Face's `tojson` filter calls, with ensure_ascii=False) and the
// conversion of parsed JSON documents into template values.
#pragma once

#include <optional>
#include <string>

#include "base/json_parser.hpp"
#include "chat/jinja_value.hpp"

namespace cortiq::jinja {

struct JsonDumpOptions {
  std::optional<int> indent;  // none: one line
  // Python's defaults: ", " and ": " on one line, "," and ": " when indented.
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;  // Hugging Face's default; Python's is true
};

// json.dumps(value, ...). Non-ASCII text is kept as is unless ensure_ascii;
// control characters, quotes and backslashes are escaped.
std::string dump_json(const Value& value, const JsonDumpOptions& options = {});

Value value_from_json(const Json& json);

}  // namespace cortiq::jinja
