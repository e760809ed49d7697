// The builtin filters, tests and methods of the template language: what
// Jinja2 ships plus the Python str/dict/list methods the sandbox allows.
#pragma once

#include <string_view>

#include "chat/jinja_value.hpp"

namespace cortiq::jinja {

// `subject | name(args)`. Throws Error("unknown filter 'name'").
Value apply_filter(std::string_view name, const Value& subject, CallArgs& args);
// `subject is name(args)`. Throws Error("unknown test 'name'").
bool apply_test(std::string_view name, const Value& subject, CallArgs& args);
// `object.name` as a callable bound to `object`, or undefined when the
// type has no such method.
Value bound_method(const Value& object, std::string_view name);

// Python str methods shared by filters and methods.
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count = -1);
std::string py_lower(std::string s);
// Markupsafe's escape: & < > " ' become entities.
std::string html_escape(std::string_view s);
std::string py_upper(std::string s);

}  // namespace cortiq::jinja
