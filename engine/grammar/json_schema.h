#ifndef LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_
#define LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_limits.h"
#include "nlohmann/json.hpp"

namespace linserve {

// A JSON schema compiled to GBNF (gbnf_parser.h) whose sentences are the
// JSON texts the schema accepts, written as a model would write them: keys in
// the order of `properties`, a little optional whitespace between tokens.
//
// Covered: `type` (all seven, or a list of them), `properties`, `required`,
// `additionalProperties` (false, true or a schema; absent: JsonSchemaOptions), `items` (a schema or false), `prefixItems`,
// `minItems`/`maxItems`, `enum`, `const` (with `type`), `anyOf`, `oneOf`
// (where its alternatives cannot overlap: different types, or a tagged
// union), `allOf` of one schema, `$ref` to
// "#", "#/$defs/..." or "#/definitions/..." (recursion allowed), `pattern`
// (the subset in regex_to_gbnf.h), `minLength`/`maxLength`,
// `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` for integers,
// and string `format` "date", "time", "date-time", "uuid". Annotations
// (title, description, default, examples, $schema, $id, $comment) are
// ignored. Any other keyword is InvalidArgument naming it and where it is
// (a JSON pointer), never silently dropped.
struct JsonSchemaOptions {
  // Absent, additionalProperties means false, as in OpenAI's strict mode and
  // xgrammar's default, so a model writes only the listed keys; false gives
  // JSON Schema's meaning (any other key may follow the listed ones).
  bool strict = true;
  // max_nesting bounds schemas inside schemas; max_repeat the counts
  // (minLength, maxLength, minItems, maxItems); max_regex_nesting and
  // max_repeat a `pattern`. The GBNF compiled from the schema is parsed
  // under the same limits.
  GrammarLimits limits;
};

// The schema must keep its keys in the order they were written (an
// ordered_json): that order is the order of the keys in the text.
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options = {});
// The same from the schema's JSON text.
absl::StatusOr<std::string> JsonSchemaTextToGbnf(std::string_view schema_text,
                                                 const JsonSchemaOptions& options = {});

// A value as generation writes it: numbers without a fraction as integers
// (1.0 as 1), so const and enum values compare as JSON Schema compares them.
nlohmann::ordered_json CanonicalJson(const nlohmann::ordered_json& value);

// Any JSON object: what response_format {"type": "json_object"} asks for.
std::string JsonObjectGbnf();

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_JSON_SCHEMA_H_
