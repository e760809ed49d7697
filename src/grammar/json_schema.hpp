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
std::string json_schema_to_gbnf(std::string_view schema_json);
std::string json_schema_to_gbnf(const Json& schema);

}  // namespace cortiq::grammar
