#include "grammar/json_schema.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "base/utf8.hpp"
#include "grammar/gbnf_text.hpp"
#include "grammar/integer_range.hpp"
#include "grammar/regex_gbnf.hpp"

namespace cortiq::grammar {

namespace {

// Keywords that constrain values in ways a grammar cannot express (or that
// this converter does not yet): refused rather than silently dropped, so
// the output never fails the schema the caller gave.
constexpr const char* kRefused[] = {"not",
                                    "if",
                                    "then",
                                    "else",
                                    "dependentRequired",
                                    "dependentSchemas",
                                    "dependencies",
                                    "patternProperties",
                                    "propertyNames",
                                    "unevaluatedItems",
                                    "contains",
                                    "minContains",
                                    "maxContains",
                                    "multipleOf",
                                    "$dynamicRef",
                                    "$recursiveRef"};

// Keywords that only describe: they never change what a schema accepts.
constexpr const char* kAnnotations[] = {
    "title",       "description",      "default",         "examples",    "$schema",    "$id",
    "$comment",    "$anchor",          "readOnly",        "writeOnly",   "deprecated", "$defs",
    "definitions", "contentMediaType", "contentEncoding", "$vocabulary", "nullable"};

bool is_annotation(std::string_view key) {
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), key) != std::end(kAnnotations);
}

constexpr int kMaxDepth = 200;
// The longest key of a member the schema does not name: a random or
// confused model must not spend its whole budget inside one key.
constexpr int64_t kMaxOtherKeyLength = 64;
constexpr int64_t kMaxCount = 10000;  // the most {m,n} the GBNF reader takes

// The rules every schema may use, written once on first use.
struct Primitive {
  const char* name;
  const char* body;
};
constexpr Primitive kPrimitives[] = {
    // At most one newline and 20 indenting characters between tokens.
    {"ws", R"(( " " | "\n" [ \t]{0,20} )?)"},
    // One character of a JSON string; \u escapes name no lone surrogate (a
    // validator would count a pair of them as one character).
    {"char",
     R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) ))"},
    {"key-char", R"([^"\\\x00-\x1F])"},
    {"string", R"("\"" char* "\"")"},
    {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,17} ))"},
    {"fraction", R"("." [0-9]{1,17})"},
    {"number", R"(integer fraction? ( [eE] [-+]? [0-9]{1,2} )?)"},
    {"boolean", R"("true" | "false")"},
    {"null", R"("null")"},
    {"value", R"(object | array | string | number | boolean | null)"},
    {"member", R"(string ws ":" ws value)"},
    {"object", R"("{" ws ( member ws ( "," ws member ws )* )? "}")"},
    {"array", R"("[" ws ( value ws ( "," ws value ws )* )? "]")"},
    {"hex", R"([0-9a-fA-F])"},
    // A calendar date (no 29 February: the year is not checked).
    {"date-only",
     R"([0-9]{4} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "04" | "06" | "09" | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02" "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ))"},
    {"date", R"("\"" date-only "\"")"},
    {"hour", R"([01] [0-9] | "2" [0-3])"},
    {"minute", R"([0-5] [0-9])"},
    {"time-of-day",
     R"(hour ":" minute ":" minute ( "." [0-9]{1,9} )? ( "Z" | [+-] hour ":" minute ))"},
    {"time", R"("\"" time-of-day "\"")"},
    {"date-time", R"("\"" date-only "T" time-of-day "\"")"},
    {"uuid", R"("\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\"")"},
    // A local part of at most 64 characters (RFC 5321) in one or two
    // dot-separated runs, and a domain of two or three labels.
    {"email-chars", R"([a-zA-Z0-9!#$%&'*+/=?^_`{|}~-])"},
    {"email",
     R"("\"" email-chars{1,32} ( "." email-chars{1,31} )? "@" host-label ( "." host-label ){1,2} "\"")"},
    // Labels of at most 63 characters, at most three: within 253 in all.
    {"host-label", R"([a-zA-Z0-9] ( [a-zA-Z0-9-]{0,61} [a-zA-Z0-9] )?)"},
    {"hostname", R"("\"" host-label ( "." host-label ){0,2} "\"")"},
    {"octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])"},
    {"ipv4", R"("\"" octet "." octet "." octet "." octet "\"")"},
};
constexpr const char* kFormats[] = {"date",  "time",     "date-time", "uuid",
                                    "email", "hostname", "ipv4"};

// The rules each primitive uses, so that only what is used is written.
const std::map<std::string, std::vector<std::string>>& primitive_uses() {
  static const std::map<std::string, std::vector<std::string>> uses = {
      {"string", {"char"}},
      {"number", {"integer", "fraction"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"member", {"string", "ws", "value"}},
      {"object", {"ws", "member"}},
      {"array", {"ws", "value"}},
      {"time-of-day", {"hour", "minute"}},
      {"time", {"time-of-day"}},
      {"date", {"date-only"}},
      {"date-time", {"date-only", "time-of-day"}},
      {"uuid", {"hex"}},
      {"email", {"email-chars", "host-label"}},
      {"hostname", {"host-label"}},
      {"ipv4", {"octet"}},
  };
  return uses;
}

// A rule name from free text: letters, digits and dashes.
std::string rule_name(std::string_view hint) {
  std::string name;
  for (const char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) {
      name += c;
    } else if (!name.empty() && name.back() != '-') {
      name += '-';
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "rule" : name.substr(0, 60);
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Code points of UTF-8 text the JSON reader has validated.
std::vector<uint32_t> code_points(std::string_view text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) out.push_back(next_utf8(text, i));
  return out;
}

std::string repeat_count(int64_t lo, std::optional<int64_t> hi) {
  if (!hi) return lo == 0 ? "*" : lo == 1 ? "+" : "{" + std::to_string(lo) + ",}";
  if (lo == 0 && *hi == 1) return "?";
  if (lo == *hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
}

struct Bound {
  double value;
  bool exclusive;
};

class SchemaConverter {
 public:
  SchemaConverter() {
    for (const Primitive& p : kPrimitives) names_.insert(p.name);
  }

  // Adds the rule `name` for the JSON texts `schema` accepts; its "#"
  // references point into it.
  void add_root(const Json& schema, const std::string& name) {
    root_ = &schema;
    refs_.clear();
    names_.insert(name);
    rules_.push_back({name, ""});
    define(name, visit(schema, "", name));
  }

  std::string gbnf() const {
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& at, const std::string& what) const {
    throw Error("JSON schema at " + (at.empty() ? std::string("the top") : at) + ": " + what);
  }

  // --- rules -------------------------------------------------------------

  std::string reserve(const std::string& hint) {
    std::string name = rule_name(hint);
    if (names_.count(name)) {
      int n = 2;
      while (names_.count(name + "-" + std::to_string(n))) ++n;
      name += "-" + std::to_string(n);
    }
    names_.insert(name);
    rules_.push_back({name, ""});
    return name;
  }

  void define(const std::string& name, const std::string& body) {
    for (auto& rule : rules_) {
      if (rule.first == name) rule.second = body.empty() ? "\"\"" : body;
    }
  }

  // A rule named after `hint` for `body`, or the rule that already has it.
  std::string add_rule(const std::string& hint, const std::string& body) {
    if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = reserve(hint);
    define(name, body);
    by_body_[body] = name;
    return name;
  }

  // A primitive rule, written (with the rules it uses) on first use under
  // its own name, which the constructor kept from the schema's rules.
  std::string primitive(const std::string& name) {
    if (primitives_.insert(name).second) {
      rules_.push_back({name, ""});
      if (const auto uses = primitive_uses().find(name); uses != primitive_uses().end()) {
        for (const std::string& used : uses->second) primitive(used);
      }
      define(name, primitive_body(name));
    }
    return name;
  }

  static std::string primitive_body(const std::string& name) {
    for (const Primitive& p : kPrimitives) {
      if (name == p.name) return p.body;
    }
    throw std::logic_error("no primitive rule " + name);
  }

  // --- schemas -----------------------------------------------------------

  std::string visit(const Json& schema, const std::string& at, const std::string& hint) {
    if (++depth_ > kMaxDepth) fail(at, "nested too deeply (more than 200 schemas)");
    std::string out = visit_schema(schema, at, hint);
    --depth_;
    return out;
  }

  std::string visit_schema(const Json& s, const std::string& at, const std::string& hint) {
    if (s.type == Json::Type::boolean) {
      if (!s.boolean) fail(at, "the schema false allows no value");
      return primitive("value");
    }
    if (s.type != Json::Type::object) fail(at, "a schema must be an object or a boolean");
    refuse_unsupported(s, at);
    if (const Json* ref = s.find("$ref")) {
      if (has_constraints(s, {"$ref"})) return visit(merge_all(s, at), at, hint);
      return ref_rule(*ref, at);
    }
    if (s.find("allOf")) return visit(merge_all(s, at), at, hint);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* options = s.find(key))
        return visit_any_of(s, *options, at + "/" + key, key, hint);
    }
    if (const Json* value = s.find("const")) return gbnf_literal(to_compact_json(*value));
    if (const Json* values = s.find("enum")) {
      if (values->type != Json::Type::array || values->array.empty()) {
        fail(at + "/enum", "enum must be a non-empty array");
      }
      std::vector<std::string> alternatives;
      for (const Json& v : values->array) alternatives.push_back(gbnf_literal(to_compact_json(v)));
      return add_rule(hint, join_nonempty(alternatives, " | "));
    }
    const std::vector<std::string> types = types_of(s, at);
    if (types.size() == 1) return visit_typed(s, types[0], at, hint);
    std::vector<std::string> alternatives;
    for (const std::string& type : types)
      alternatives.push_back(visit_typed(s, type, at, hint + "-" + type));
    return add_rule(hint, join_nonempty(alternatives, " | "));
  }

  void refuse_unsupported(const Json& s, const std::string& at) const {
    for (const char* key : kRefused) {
      if (s.find(key)) fail(at, strfmt("\"%s\" cannot be expressed in a grammar", key));
    }
    if (const Json* unique = s.find("uniqueItems");
        unique && unique->type == Json::Type::boolean && unique->boolean) {
      fail(at, "\"uniqueItems\" cannot be expressed in a grammar");
    }
    if (const Json* u = s.find("unevaluatedProperties");
        u && !(u->type == Json::Type::boolean && !u->boolean)) {
      fail(at, "\"unevaluatedProperties\" is supported only as false");
    }
  }

  static bool has_constraints(const Json& s, std::initializer_list<std::string_view> besides) {
    for (const auto& [key, value] : s.object) {
      if (is_annotation(key)) continue;
      if (std::find(besides.begin(), besides.end(), key) != besides.end()) continue;
      return true;
    }
    return false;
  }

  std::vector<std::string> types_of(const Json& s, const std::string& at) const {
    const Json* type = s.find("type");
    std::vector<std::string> types;
    if (!type) {
      auto any = [&s](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(),
                           [&s](const char* k) { return s.find(k) != nullptr; });
      };
      if (any({"properties", "required", "additionalProperties", "unevaluatedProperties",
               "minProperties", "maxProperties"})) {
        return {"object"};
      }
      if (any({"items", "prefixItems", "additionalItems", "minItems", "maxItems"}))
        return {"array"};
      if (any({"minLength", "maxLength", "pattern", "format"})) return {"string"};
      if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) return {"number"};
      return {"any"};
    }
    if (type->type == Json::Type::string) {
      types.push_back(type->string);
    } else if (type->type == Json::Type::array && !type->array.empty()) {
      for (const Json& t : type->array) {
        if (t.type != Json::Type::string) fail(at + "/type", "type names must be strings");
        types.push_back(t.string);
      }
    } else {
      fail(at + "/type", "type must be a string or a non-empty array of strings");
    }
    for (const std::string& t : types) {
      static const std::set<std::string> known = {"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};
      if (!known.count(t)) fail(at + "/type", "unknown type \"" + t + "\"");
    }
    return types;
  }

  std::string visit_typed(const Json& s, const std::string& type, const std::string& at,
                          const std::string& hint) {
    if (type == "object") return visit_object(s, at, hint);
    if (type == "array") return visit_array(s, at, hint);
    if (type == "string") return visit_string(s, at, hint);
    if (type == "integer") return visit_integer(s, at, hint);
    if (type == "number") return visit_number(s, at, hint);
    if (type == "boolean") return primitive("boolean");
    if (type == "null") return primitive("null");
    return primitive("value");
  }

  std::string visit_any_of(const Json& s, const Json& options, const std::string& at,
                           const char* key, const std::string& hint) {
    if (options.type != Json::Type::array || options.array.empty()) {
      fail(at, std::string(key) + " must be a non-empty array of schemas");
    }
    // Constraints beside anyOf apply to every option: merged into each.
    Json base = s;
    std::erase_if(base.object, [key](const auto& m) { return m.first == key; });
    const bool shared = has_constraints(base, {});
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < options.array.size(); ++i) {
      const std::string option_at = at + "/" + std::to_string(i);
      if (!shared) {
        alternatives.push_back(visit(options.array[i], option_at, hint + "-" + std::to_string(i)));
        continue;
      }
      Json both;
      both.type = Json::Type::object;
      Json list;
      list.type = Json::Type::array;
      list.array = {base, options.array[i]};
      both.object.push_back({"allOf", std::move(list)});
      alternatives.push_back(visit(both, option_at, hint + "-" + std::to_string(i)));
    }
    return add_rule(hint, join_nonempty(alternatives, " | "));
  }

  // --- references and allOf ---------------------------------------------

  const Json& resolve(const Json& ref, const std::string& at) const {
    if (ref.type != Json::Type::string) fail(at + "/$ref", "$ref must be a string");
    const std::string& target = ref.string;
    if (target.empty() || target[0] != '#') {
      fail(at + "/$ref",
           "only references inside the schema (\"#/...\") are supported, not \"" + target + "\"");
    }
    const Json* node = root_;
    std::string_view rest = std::string_view(target).substr(1);
    if (!rest.empty() && rest[0] != '/')
      fail(at + "/$ref", "anchors (\"" + target + "\") are not supported");
    while (!rest.empty()) {
      rest.remove_prefix(1);
      const size_t slash = rest.find('/');
      std::string token(rest.substr(0, slash));
      rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          key += token[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          key += token[i];
        }
      }
      const Json* next = nullptr;
      if (node->type == Json::Type::object) {
        next = node->find(key);
      } else if (node->type == Json::Type::array && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos && key.size() < 10) {
        const size_t index = std::stoul(key);
        if (index < node->array.size()) next = &node->array[index];
      }
      if (!next) fail(at + "/$ref", "\"" + target + "\" does not resolve");
      node = next;
    }
    return *node;
  }

  std::string ref_rule(const Json& ref, const std::string& at) {
    const Json& target = resolve(ref, at);
    if (const auto it = refs_.find(ref.string); it != refs_.end()) return it->second;
    const size_t slash = ref.string.rfind('/');
    const std::string hint = slash == std::string::npos ? "root-ref" : ref.string.substr(slash + 1);
    // Named before its body is made: the body may come back to it.
    const std::string name = reserve(hint);
    refs_[ref.string] = name;
    define(name, visit(target, ref.string.substr(1), hint));
    return name;
  }

  // The schema's allOf (and a $ref beside other keywords) merged into one
  // schema: properties and required united, bounds tightened, types
  // intersected; anything else must agree.
  Json merge_all(const Json& s, const std::string& at) {
    if (++depth_ > kMaxDepth) fail(at, "allOf or $ref nested too deeply");
    std::vector<Json> parts;
    Json rest = s;
    std::erase_if(rest.object,
                  [](const auto& m) { return m.first == "allOf" || m.first == "$ref"; });
    if (const Json* ref = s.find("$ref")) parts.push_back(flatten(resolve(*ref, at), at));
    if (const Json* all = s.find("allOf")) {
      if (all->type != Json::Type::array || all->array.empty())
        fail(at + "/allOf", "allOf must be a non-empty array");
      for (size_t i = 0; i < all->array.size(); ++i) {
        parts.push_back(flatten(all->array[i], at + "/allOf/" + std::to_string(i)));
      }
    }
    Json merged = flatten(rest, at);
    for (const Json& part : parts) merge_into(merged, part, at);
    --depth_;
    return merged;
  }

  // A schema without top-level allOf or $ref.
  Json flatten(const Json& s, const std::string& at) {
    if (s.type == Json::Type::boolean) {
      if (!s.boolean) fail(at, "the schema false allows no value");
      Json empty;
      empty.type = Json::Type::object;
      return empty;
    }
    if (s.type != Json::Type::object) fail(at, "a schema must be an object or a boolean");
    refuse_unsupported(s, at);
    if (s.find("allOf") || s.find("$ref")) return merge_all(s, at);
    return s;
  }

  void merge_into(Json& into, const Json& part, const std::string& at) {
    for (const auto& [key, value] : part.object) {
      Json* mine = nullptr;
      for (auto& member : into.object) {
        if (member.first == key) mine = &member.second;
      }
      if (!mine) {
        into.object.push_back({key, value});
        continue;
      }
      merge_keyword(key, *mine, value, at);
    }
  }

  void merge_keyword(const std::string& key, Json& mine, const Json& theirs,
                     const std::string& at) {
    auto number = [](const Json& v) {
      return v.type == Json::Type::integer ? static_cast<double>(v.integer) : v.number;
    };
    if (is_annotation(key)) return;
    if (key == "properties") {
      if (mine.type != Json::Type::object || theirs.type != Json::Type::object)
        fail(at, "properties must be objects");
      for (const auto& [name, schema] : theirs.object) {
        Json* existing = nullptr;
        for (auto& member : mine.object) {
          if (member.first == name) existing = &member.second;
        }
        if (!existing) {
          mine.object.push_back({name, schema});
          continue;
        }
        Json list;
        list.type = Json::Type::array;
        list.array = {*existing, schema};
        Json both;
        both.type = Json::Type::object;
        both.object.push_back({"allOf", std::move(list)});
        *existing = std::move(both);
      }
    } else if (key == "required") {
      for (const Json& name : theirs.array) {
        const bool present =
            std::any_of(mine.array.begin(), mine.array.end(),
                        [&name](const Json& n) { return n.string == name.string; });
        if (!present) mine.array.push_back(name);
      }
    } else if (key == "type") {
      mine = intersect_types(mine, theirs, at);
    } else if (key == "minimum" || key == "minLength" || key == "minItems" ||
               key == "exclusiveMinimum" || key == "minProperties") {
      if (number(theirs) > number(mine)) mine = theirs;
    } else if (key == "maximum" || key == "maxLength" || key == "maxItems" ||
               key == "exclusiveMaximum" || key == "maxProperties") {
      if (number(theirs) < number(mine)) mine = theirs;
    } else if (key == "additionalProperties" &&
               (theirs.type == Json::Type::boolean || mine.type == Json::Type::boolean)) {
      // false wins; true yields to a schema.
      if (theirs.type == Json::Type::boolean && !theirs.boolean)
        mine = theirs;
      else if (mine.type == Json::Type::boolean && mine.boolean)
        mine = theirs;
    } else if (to_compact_json(mine) != to_compact_json(theirs)) {
      fail(at + "/allOf", "cannot combine two different \"" + key + "\"");
    }
  }

  Json intersect_types(const Json& a, const Json& b, const std::string& at) const {
    auto names = [&](const Json& t) {
      std::vector<std::string> out;
      if (t.type == Json::Type::string) out.push_back(t.string);
      for (const Json& n : t.array) out.push_back(n.string);
      return out;
    };
    const std::vector<std::string> left = names(a), right = names(b);
    Json out;
    out.type = Json::Type::array;
    for (const std::string& l : left) {
      for (const std::string& r : right) {
        std::string both;
        if (l == r)
          both = l;
        else if ((l == "integer" && r == "number") || (l == "number" && r == "integer"))
          both = "integer";
        if (!both.empty()) {
          Json name;
          name.type = Json::Type::string;
          name.string = both;
          out.array.push_back(std::move(name));
        }
      }
    }
    if (out.array.empty()) fail(at + "/allOf", "the types of allOf have nothing in common");
    return out;
  }

  // --- objects -----------------------------------------------------------

  struct Member {
    std::string kv;  // the member, key to value
    enum class Kind { required, optional, repeated } kind;
    int64_t min = 0;                  // repeated: how many times
    std::optional<int64_t> max = {};  // (none: no limit)
  };

  std::string visit_object(const Json& s, const std::string& at, const std::string& hint) {
    const Json* properties = s.find("properties");
    if (properties && properties->type != Json::Type::object)
      fail(at + "/properties", "properties must be an object");
    std::set<std::string> required;
    if (const Json* r = s.find("required")) {
      if (r->type != Json::Type::array)
        fail(at + "/required", "required must be an array of names");
      for (const Json& name : r->array) {
        if (name.type != Json::Type::string)
          fail(at + "/required", "required must be an array of names");
        required.insert(name.string);
      }
    }
    const std::string ws = primitive("ws");
    std::vector<Member> members;
    std::vector<std::string> declared;
    if (properties) {
      for (const auto& [name, schema] : properties->object) {
        const std::string property_at = at + "/properties/" + pointer_token(name);
        declared.push_back(name);
        if (schema.type == Json::Type::boolean && !schema.boolean) {
          // A member that may not appear: never written, and no other key spells it.
          if (required.count(name))
            fail(property_at, "a required member whose schema (false) allows no value");
          continue;
        }
        const std::string value = visit(schema, property_at, hint + "-" + name);
        members.push_back({key_literal(name) + " " + ws + " \":\" " + ws + " " + value,
                           required.count(name) ? Member::Kind::required : Member::Kind::optional});
      }
    }
    // Required members not among the properties take additionalProperties' schema.
    const Json* additional = s.find("additionalProperties");
    for (const std::string& name : required) {
      if (std::find(declared.begin(), declared.end(), name) != declared.end()) continue;
      if (additional && additional->type == Json::Type::boolean && !additional->boolean) {
        fail(at + "/required",
             "\"" + name +
                 "\" is required but not among the properties, and additionalProperties is false");
      }
      const std::string value =
          additional && additional->type == Json::Type::object
              ? visit(*additional, at + "/additionalProperties", hint + "-additional")
              : primitive("value");
      members.push_back(
          {key_literal(name) + " " + ws + " \":\" " + ws + " " + value, Member::Kind::required});
      declared.push_back(name);
    }
    const Json* unevaluated = s.find("unevaluatedProperties");
    const bool open = additional
                          ? !(additional->type == Json::Type::boolean && !additional->boolean)
                          : (!unevaluated && declared.empty());
    // minProperties and maxProperties count the other members beside the
    // required ones (optional members would make the count a grammar of
    // its own).
    const std::optional<int64_t> min_properties = count_keyword(s, "minProperties", at);
    const std::optional<int64_t> max_properties = count_keyword(s, "maxProperties", at);
    const auto n_required = static_cast<int64_t>(members.size());
    int64_t extra_min = 0;
    std::optional<int64_t> extra_max;
    if (min_properties || max_properties) {
      const bool optional = std::any_of(members.begin(), members.end(), [](const Member& m) {
        return m.kind == Member::Kind::optional;
      });
      if (optional)
        fail(at, "minProperties or maxProperties beside optional properties is not supported");
      extra_min = std::max<int64_t>(0, min_properties.value_or(0) - n_required);
      if (max_properties) {
        if (*max_properties < n_required)
          fail(at, "maxProperties is below the number of required members");
        extra_max = *max_properties - n_required;
      }
      if (extra_max && *extra_max < extra_min) fail(at, "maxProperties is below minProperties");
      if (!open && extra_min > 0)
        fail(at, "minProperties asks for more members than the schema allows");
    }
    if (open && extra_max != 0) {
      const std::string value =
          additional && additional->type == Json::Type::object
              ? visit(*additional, at + "/additionalProperties", hint + "-additional")
              : primitive("value");
      const std::string key = other_key(declared, hint);
      members.push_back({key + " " + ws + " \":\" " + ws + " " + value, Member::Kind::repeated,
                         extra_min, extra_max});
    } else if (extra_min > 0) {
      fail(at, "minProperties asks for more members than the schema allows");
    }
    std::vector<std::optional<std::string>> memo(2 * members.size() + 2);
    const std::string inner = member_rules(members, 0, false, hint, memo);
    return add_rule(hint, join_nonempty({"\"{\"", ws, inner, "\"}\""}, " "));
  }

  std::string key_literal(const std::string& name) const {
    return gbnf_literal(JsonWriter::quote(name));
  }

  // The members from i on; `written`: whether one came before (a comma is
  // due). One rule per (i, written), so the grammar grows linearly.
  std::string member_rules(const std::vector<Member>& members, size_t i, bool written,
                           const std::string& hint, std::vector<std::optional<std::string>>& memo) {
    if (i == members.size()) return "";
    std::optional<std::string>& done = memo[2 * i + (written ? 1 : 0)];
    if (done) return *done;
    const std::string ws = primitive("ws");
    const std::string comma = "\",\" " + ws;
    const Member& m = members[i];
    std::string body;
    if (m.kind == Member::Kind::repeated) {
      const std::string next = "( " + comma + " " + m.kv + " " + ws + " )";
      if (written) {
        body = next + repeat_count(m.min, m.max);
      } else {
        const std::optional<int64_t> more =
            m.max ? std::optional<int64_t>(*m.max - 1) : std::nullopt;
        body = m.kv + " " + ws +
               (more == 0 ? "" : " " + next + repeat_count(std::max<int64_t>(0, m.min - 1), more));
        if (m.min == 0) body = "( " + body + " )?";
      }
    } else {
      const std::string with = join_nonempty(
          {written ? comma : "", m.kv, ws, member_rules(members, i + 1, true, hint, memo)}, " ");
      if (m.kind == Member::Kind::required) {
        body = with;
      } else {
        const std::string skip = member_rules(members, i + 1, written, hint, memo);
        body = skip.empty() ? "( " + with + " )?" : with + " | " + skip;
      }
    }
    done = add_rule(hint + "-members", body);
    return *done;
  }

  // A JSON string key other than the declared ones (written without
  // escapes, so that no escape spells a declared key), of at most
  // kMaxOtherKeyLength characters.
  std::string other_key(const std::vector<std::string>& declared, const std::string& hint) {
    struct Node {
      bool terminal = false;
      std::map<uint32_t, Node> children;
    };
    Node root;
    for (const std::string& name : declared) {
      Node* node = &root;
      bool writable = true;
      for (const uint32_t cp : code_points(name)) {
        if (cp < 0x20 || cp == '"' || cp == '\\') writable = false;  // never written raw
        node = &node->children[cp];
      }
      if (writable) node->terminal = true;
    }
    const std::string quote = "\"\\\"\"";
    const std::string key_char = primitive("key-char");
    std::function<std::string(const Node&, int64_t)> rule = [&](const Node& node, int64_t depth) {
      std::vector<std::string> alternatives;
      if (!node.terminal) alternatives.push_back(quote);
      if (depth < kMaxOtherKeyLength) {
        std::string others = "[^\"\\\\\\x00-\\x1F";
        for (const auto& [cp, child] : node.children) others += gbnf_char(cp);
        alternatives.push_back(others + "] " + key_char +
                               repeat_count(0, kMaxOtherKeyLength - depth - 1) + " " + quote);
      }
      for (const auto& [cp, child] : node.children) {
        if (cp < 0x20 || cp == '"' || cp == '\\') continue;
        alternatives.push_back(
            strfmt("[%s] %s", gbnf_char(cp).c_str(), rule(child, depth + 1).c_str()));
      }
      return add_rule(hint + "-other-key", join_nonempty(alternatives, " | "));
    };
    return quote + " " + rule(root, 0);
  }

  // --- arrays ------------------------------------------------------------

  std::string visit_array(const Json& s, const std::string& at, const std::string& hint) {
    std::vector<std::string> prefix;
    const Json* rest = nullptr;  // the schema of the items after the prefix
    bool rest_allowed = true;
    const Json* prefix_items = s.find("prefixItems");
    const Json* items = s.find("items");
    std::string prefix_at = at + "/prefixItems";
    if (!prefix_items && items && items->type == Json::Type::array) {
      prefix_items = items;  // draft 4-7 tuples
      prefix_at = at + "/items";
      items = s.find("additionalItems");
    }
    if (prefix_items) {
      if (prefix_items->type != Json::Type::array) fail(prefix_at, "must be an array of schemas");
      for (size_t i = 0; i < prefix_items->array.size(); ++i) {
        prefix.push_back(visit(prefix_items->array[i], prefix_at + "/" + std::to_string(i),
                               hint + "-" + std::to_string(i)));
      }
    }
    if (items) {
      if (items->type == Json::Type::boolean && !items->boolean) {
        rest_allowed = false;
      } else {
        rest = items;
      }
    }
    const int64_t min_items = count_keyword(s, "minItems", at).value_or(0);
    std::optional<int64_t> max_items = count_keyword(s, "maxItems", at);
    if (max_items && *max_items < min_items) fail(at, "maxItems is below minItems");
    const auto n_prefix = static_cast<int64_t>(prefix.size());
    if (!rest_allowed) {
      if (min_items > n_prefix) fail(at, "minItems asks for more items than the schema allows");
      max_items = std::min(max_items.value_or(n_prefix), n_prefix);
    }
    const std::string ws = primitive("ws");
    const std::string comma = "\",\" " + ws;
    const std::string item =
        rest_allowed ? (rest ? visit(*rest, at + "/items", hint + "-item") : primitive("value"))
                     : "";
    const int64_t written_prefix = max_items ? std::min(n_prefix, *max_items) : n_prefix;
    // After the prefix: the other items, each behind a comma.
    std::string cont;
    if (rest_allowed && (!max_items || *max_items > n_prefix)) {
      const int64_t lo = std::max<int64_t>(0, min_items - n_prefix);
      const std::optional<int64_t> hi =
          max_items ? std::optional<int64_t>(*max_items - n_prefix) : std::nullopt;
      if (n_prefix == 0) {
        const std::optional<int64_t> more = hi ? std::optional<int64_t>(*hi - 1) : std::nullopt;
        cont = join_nonempty({item, ws,
                              "( " + comma + " " + item + " " + ws + " )" +
                                  repeat_count(std::max<int64_t>(0, lo - 1), more)},
                             " ");
        if (more && *more == 0) cont = item + " " + ws;
        if (lo == 0) cont = "( " + cont + " )?";
      } else {
        cont = "( " + comma + " " + item + " " + ws + " )" + repeat_count(lo, hi);
      }
    }
    for (int64_t i = written_prefix - 1; i >= 0; --i) {
      cont = join_nonempty({i > 0 ? comma : "", prefix[static_cast<size_t>(i)], ws, cont}, " ");
      if (i >= min_items) cont = "( " + cont + " )?";
    }
    return add_rule(hint, join_nonempty({"\"[\"", ws, cont, "\"]\""}, " "));
  }

  std::optional<int64_t> count_keyword(const Json& s, const char* key,
                                       const std::string& at) const {
    const Json* v = s.find(key);
    if (!v) return std::nullopt;
    int64_t n = -1;
    if (v->type == Json::Type::integer) n = v->integer;
    if (v->type == Json::Type::number && v->number == std::floor(v->number) && v->number < 1e15) {
      n = static_cast<int64_t>(v->number);
    }
    if (n < 0) fail(at + "/" + key, std::string(key) + " must be a non-negative integer");
    if (n > kMaxCount)
      fail(at + "/" + key,
           strfmt("%s above %lld is not supported", key, static_cast<long long>(kMaxCount)));
    return n;
  }

  // --- strings -----------------------------------------------------------

  std::string visit_string(const Json& s, const std::string& at, const std::string& hint) {
    const Json* format = s.find("format");
    const Json* pattern = s.find("pattern");
    const std::optional<int64_t> min_length = count_keyword(s, "minLength", at);
    const std::optional<int64_t> max_length = count_keyword(s, "maxLength", at);
    const bool lengths = min_length || max_length;
    if (format && (pattern || lengths))
      fail(at, "format with pattern, minLength or maxLength is not supported");
    if (pattern && lengths) fail(at, "pattern with minLength or maxLength is not supported");
    if (format) {
      if (format->type != Json::Type::string) fail(at + "/format", "format must be a string");
      if (std::find(std::begin(kFormats), std::end(kFormats), format->string) ==
          std::end(kFormats)) {
        fail(at + "/format", "format \"" + format->string +
                                 "\" is not supported (supported: date, time, date-time, uuid, "
                                 "email, hostname, ipv4)");
      }
      return primitive(format->string);
    }
    const std::string quote = "\"\\\"\"";
    if (pattern) {
      if (pattern->type != Json::Type::string) fail(at + "/pattern", "pattern must be a string");
      std::string body;
      try {
        body = json_string_pattern_gbnf(pattern->string, primitive("char"));
      } catch (const Error& e) {
        fail(at + "/pattern", e.what());
      }
      return add_rule(hint, join_nonempty({quote, body, quote}, " "));
    }
    if (lengths) {
      const int64_t lo = min_length.value_or(0);
      if (max_length && *max_length < lo) fail(at, "maxLength is below minLength");
      return add_rule(
          hint,
          join_nonempty({quote, primitive("char") + repeat_count(lo, max_length), quote}, " "));
    }
    return primitive("string");
  }

  // --- numbers -----------------------------------------------------------

  std::optional<Bound> bound(const Json& s, const char* inclusive_key, const char* exclusive_key,
                             const std::string& at) const {
    auto number = [&](const Json* v, const char* key) {
      if (v->type == Json::Type::integer) return static_cast<double>(v->integer);
      if (v->type == Json::Type::number) return v->number;
      fail(at + "/" + key, std::string(key) + " must be a number");
    };
    std::optional<Bound> out;
    const Json* inclusive = s.find(inclusive_key);
    const Json* exclusive = s.find(exclusive_key);
    if (inclusive) out = Bound{number(inclusive, inclusive_key), false};
    if (exclusive && exclusive->type == Json::Type::boolean) {  // draft 4
      if (exclusive->boolean && out) out->exclusive = true;
    } else if (exclusive) {
      const double x = number(exclusive, exclusive_key);
      const bool tighter = !out || (inclusive_key[1] == 'i' ? x >= out->value : x <= out->value);
      if (tighter) out = Bound{x, true};
    }
    return out;
  }

  // The least and greatest integers within the bounds (clamped to what an
  // integer range writes).
  std::pair<std::optional<int64_t>, std::optional<int64_t>> integer_bounds(
      const std::optional<Bound>& lo, const std::optional<Bound>& hi) const {
    const auto limit = static_cast<double>(kIntegerRangeLimit);
    std::optional<int64_t> first, last;
    if (lo) {
      const double v = lo->exclusive ? std::floor(lo->value) + 1 : std::ceil(lo->value);
      first = static_cast<int64_t>(std::clamp(v, -limit - 1, limit + 1));
    }
    if (hi) {
      const double v = hi->exclusive ? std::ceil(hi->value) - 1 : std::floor(hi->value);
      last = static_cast<int64_t>(std::clamp(v, -limit - 1, limit + 1));
    }
    return {first, last};
  }

  std::string visit_integer(const Json& s, const std::string& at, const std::string& hint) {
    const auto lo = bound(s, "minimum", "exclusiveMinimum", at);
    const auto hi = bound(s, "maximum", "exclusiveMaximum", at);
    if (!lo && !hi) return primitive("integer");
    auto [first, last] = integer_bounds(lo, hi);
    if (first && last && *first > *last) fail(at, "no integer lies between minimum and maximum");
    check_range(first, last, at);
    return add_rule(hint, integer_range_gbnf(first, last));
  }

  void check_range(std::optional<int64_t> first, std::optional<int64_t> last,
                   const std::string& at) const {
    if ((first && *first > kIntegerRangeLimit) || (last && *last < -kIntegerRangeLimit)) {
      fail(at, "bounds beyond 18 digits are not supported");
    }
  }

  // Bounded numbers: the integers within the bounds, and the numbers with a
  // fraction whose integer part n keeps every n.ddd inside them.
  std::string visit_number(const Json& s, const std::string& at, const std::string& hint) {
    const auto lo = bound(s, "minimum", "exclusiveMinimum", at);
    const auto hi = bound(s, "maximum", "exclusiveMaximum", at);
    if (!lo && !hi) return primitive("number");
    auto [first, last] = integer_bounds(lo, hi);
    check_range(first, last, at);
    const std::string fraction = primitive("fraction");
    std::vector<std::string> alternatives;
    const int64_t limit = kIntegerRangeLimit;
    if (!first || !last || *first <= *last) alternatives.push_back(integer_range_gbnf(first, last));
    // n >= 0: n.ddd lies in [n, n + 1), so n + 1 <= maximum.
    const int64_t pos_lo = std::max<int64_t>(0, first.value_or(0));
    const int64_t pos_hi = hi ? static_cast<int64_t>(std::clamp(std::floor(hi->value) - 1, -1.0,
                                                                static_cast<double>(limit)))
                              : limit;
    if (pos_lo <= pos_hi)
      alternatives.push_back(integer_range_gbnf(pos_lo, pos_hi) + " " + fraction);
    // -n (n >= 1): -n.ddd lies in (-n - 1, -n], so -n - 1 >= minimum.
    const int64_t neg_lo = std::max<int64_t>(1, last ? -*last : 1);
    const int64_t neg_hi = lo ? static_cast<int64_t>(std::clamp(std::floor(-lo->value) - 1, 0.0,
                                                                static_cast<double>(limit)))
                              : limit;
    if (neg_lo <= neg_hi)
      alternatives.push_back("\"-\" " + integer_range_gbnf(neg_lo, neg_hi) + " " + fraction);
    if (alternatives.empty()) {
      fail(at,
           "minimum and maximum leave no number this grammar writes (it keeps each n.ddd "
           "it allows, from n to n + 1, inside the bounds)");
    }
    return add_rule(hint, join_nonempty(alternatives, " | "));
  }

  const Json* root_ = nullptr;                              // of the schema being added
  std::vector<std::pair<std::string, std::string>> rules_;  // in the order written
  std::set<std::string> names_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> primitives_;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const Json& schema, std::string_view root_name) {
  SchemaConverter converter;
  converter.add_root(schema, std::string(root_name));
  return converter.gbnf();
}

std::string json_schemas_to_gbnf(std::span<const NamedSchema> schemas) {
  SchemaConverter converter;
  for (const NamedSchema& s : schemas) {
    try {
      converter.add_root(s.schema, s.rule);
    } catch (const Error& e) {
      throw Error(s.label.empty() ? std::string(e.what()) : s.label + ": " + e.what());
    }
  }
  return converter.gbnf();
}

std::string json_schema_to_gbnf(std::string_view schema_json, std::string_view root_name) {
  Json schema;
  try {
    schema = parse_json(schema_json);
  } catch (const Error& e) {
    throw Error(std::string("JSON schema: ") + e.what());
  }
  return json_schema_to_gbnf(schema, root_name);
}

}  // namespace cortiq::grammar
