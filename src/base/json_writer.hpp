// A small streaming JSON writer: objects, arrays, strings with proper
// escaping, and numbers that read back exactly. Used by `cortiq inspect
// --json` and, later, by the HTTP server.
//
//   JsonWriter json(/*indent=*/2);
//   json.begin_object();
//   json.key("name").value("llama");
//   json.key("shape").begin_array().value(int64_t{4096}).value(int64_t{32000}).end_array();
//   json.end_object();
//   std::string text = json.take();
//
// Misuse (a value where a key is due, unbalanced ends) throws
// std::logic_error: it is a bug in the caller, not bad input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

class JsonWriter {
 public:
  // indent 0 writes everything on one line; n > 0 pretty-prints with n spaces.
  explicit JsonWriter(int indent = 0) : indent_(indent) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // The key of the next member; only inside an object.
  JsonWriter& key(std::string_view name);

  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int32_t n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(uint32_t n) { return value(static_cast<uint64_t>(n)); }
  // Shortest text that reads back as the same double / float; NaN and
  // infinities, which JSON cannot express, are written as null.
  JsonWriter& value(double x);
  JsonWriter& value(float x);
  JsonWriter& null();

  // The document so far; complete() tells whether every container is closed.
  const std::string& text() const { return out_; }
  bool complete() const { return stack_.empty() && has_root_; }
  std::string take() { return std::move(out_); }

  // `text` as a quoted JSON string: ", \ and control characters escaped,
  // invalid UTF-8 bytes replaced by U+FFFD so the output is always valid.
  static std::string quote(std::string_view text);

 private:
  enum class Scope { object, array };
  struct Frame {
    Scope scope;
    bool empty = true;
    bool key_pending = false;
  };

  void before_value();
  void newline_and_indent(size_t depth);
  JsonWriter& close(Scope scope);

  int indent_;
  std::string out_;
  std::vector<Frame> stack_;
  bool has_root_ = false;
};

}  // namespace cortiq
