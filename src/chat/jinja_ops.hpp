// Python semantics the interpreter and the builtins share: attribute and
// item lookup, comparison, membership, iteration and slicing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.hpp"

namespace cortiq::jinja {

// Jinja's getattr: a method of the object first, then a dict item. Missing
// attributes are undefined rather than errors.
Value get_attr(const Value& object, std::string_view name);
// Jinja's getitem: obj[key] first (negative list indices count from the
// end), then a method of that name.
Value get_item(const Value& object, const Value& key);
// Python's obj[start:stop:step] for lists and strings.
Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);

// <0, 0, >0 like Python's ordering; throws for types Python cannot order.
int compare(const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);
// What `for x in value` visits: list items, dict keys, string characters.
std::vector<Value> iterate(const Value& value);

// UTF-8 text split into code points, so indexing matches Python.
std::vector<std::string> code_points(const std::string& text);

}  // namespace cortiq::jinja
