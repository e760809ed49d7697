// A strict JSON reader (RFC 8259) into a small tree that keeps object
// members in document order. Used for chat messages and request bodies.
//
//   Json doc = parse_json(R"({"role": "user", "content": "hi"})");
//   doc.find("role")->string  // "user"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cortiq {

struct Json {
  enum class Type { null, boolean, integer, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  int64_t integer = 0;  // integers that fit keep their exact value
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;

  // The member named `key` of an object, or nullptr.
  const Json* find(std::string_view key) const;
};

// Throws cortiq::Error("JSON at offset N: ...") on malformed input, trailing
// garbage, or nesting deeper than 512 levels.
Json parse_json(std::string_view text);

// The value as compact JSON text (members in their order, no spaces).
std::string to_compact_json(const Json& value);

}  // namespace cortiq
