// JSON Schema to a GBNF grammar whose sentences are JSON texts the schema
// accepts: what `--json-schema` and the server's response_format
// constrain decoding with.
//
//   json_schema_to_gbnf(R"({"type": "object", "properties": {"n": {"type": "integer"}},
//                           "required": ["n"]})")
//   // root ::= "{" ws "\"n\"" ws ":" ws integer ws "}"  (and the rules it uses)
//
// Understood: type (one or a list), properties, required,
// additionalProperties (absent: no other members when properties are
// given, any when not), minProperties and maxProperties (where no
// property is optional), enum, const, items, prefixItems, items as a list
// with additionalItems (draft 7), minItems, maxItems, minLength,
// maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers
// and draft 4's booleans), pattern (regex_gbnf.hpp), format (date, time,
// date-time, uuid, email, hostname, ipv4), anyOf, oneOf (as anyOf: a value
// the alternatives share is not kept out), allOf (objects and like
// constraints merged), $ref to "#" and "#/..." pointers ($defs,
// definitions), recursion included. Annotations (title, description,
// default, examples, ...) and unknown keywords are ignored, as validators
// do. Members come in the order of "properties".
//
// The output is the JSON with whitespace allowed where JSON allows it but
// bounded (at most one newline and 20 indenting characters at a time),
// numbers of at most 18 integer digits, and the keys of members the schema
// does not name (additionalProperties) of at most 64 characters, so a model
// cannot fill its budget with blanks, digits or one key.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace cortiq {
struct Json;
}

namespace cortiq::grammar {

// Throws cortiq::Error naming where in the schema the problem is ("JSON
// schema at /properties/when: format \"uri\" is not supported ...") for a
// keyword that constrains values in a way a grammar cannot express (not,
// if/then/else, uniqueItems, multipleOf, patternProperties, ...), a
// reference that does not resolve, or a schema that allows nothing.
// root_name: the rule the JSON text is (a grammar that embeds it names it
// otherwise; the other rules' names are the schema's and the primitives').
std::string json_schema_to_gbnf(std::string_view schema_json, std::string_view root_name = "root");
std::string json_schema_to_gbnf(const Json& schema, std::string_view root_name = "root");

// Several schemas in one grammar (sharing the common rules), each as the
// rule it names: give names with an underscore ("tool_args_0"), which the
// converter's own rule names never have. No root rule is written. An error
// starts with the schema's label ("tool \"f\": JSON schema at ...").
struct NamedSchema {
  std::string rule;
  const Json& schema;
  std::string label;
};
std::string json_schemas_to_gbnf(std::span<const NamedSchema> schemas);

}  // namespace cortiq::grammar
