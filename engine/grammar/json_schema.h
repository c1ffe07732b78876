#ifndef LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_
#define LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace linserve {

// A JSON schema compiled to GBNF (gbnf_parser.h) whose sentences are the
// JSON texts the schema accepts, written as a model would write them: keys in
// the order of `properties`, a little optional whitespace between tokens.
//
// Covered: `type` (all seven, or a list of them), `properties`, `required`,
// `additionalProperties` (false, true or a schema; absent means false, as in
// OpenAI's strict mode), `items` (a schema or false), `prefixItems`,
// `minItems`/`maxItems`, `enum`, `const`, `anyOf`/`oneOf` (oneOf as anyOf:
// a grammar cannot exclude the overlap), `allOf` of one schema, `$ref` to
// "#", "#/$defs/..." or "#/definitions/..." (recursion allowed), `pattern`
// (the subset in regex_to_gbnf.h), `minLength`/`maxLength`,
// `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` for integers,
// and string `format` "date", "time", "date-time", "uuid". Annotations
// (title, description, default, examples, $schema, $id, $comment) are
// ignored. Any other keyword is InvalidArgument naming it and where it is
// (a JSON pointer), never silently dropped.
// The schema must keep its keys in the order they were written (an
// ordered_json): that order is the order of the keys in the text.
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema);
// The same from the schema's JSON text.
absl::StatusOr<std::string> JsonSchemaTextToGbnf(std::string_view schema_text);

// Any JSON object: what response_format {"type": "json_object"} asks for.
std::string JsonObjectGbnf();

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_
