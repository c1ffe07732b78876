#ifndef LINSERVE_SERVER_HTTP_TOOL_CALL_GRAMMAR_H_
#define LINSERVE_SERVER_HTTP_TOOL_CALL_GRAMMAR_H_

// tool_choice "required" or a named function, for a model that calls tools
// in its own format (tool_call_parser.h): a GBNF grammar whose sentences are
// calls in that format that ToolCallParser reads back whole, their
// arguments fitting each function's `parameters` schema.

#include <string>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_limits.h"
#include "linserve/v1/linserve.pb.h"
#include "server/http/openai_tools.h"
#include "server/http/tool_call_parser.h"

namespace linserve {

// `format`: hermes or qwen3_coder. `tools.max_calls` > 1 lets calls follow
// one another. An XML parameter of type string is its raw text (no '<'; at
// most maxLength characters), an untyped one or a list of types with string
// too; other types are written as JSON. A schema keyword the grammar cannot
// honour is INVALID_ARGUMENT naming the tool. `lead`: text before the
// first call (a prompt that opened the reasoning closes it at once).
absl::StatusOr<std::string> ModelToolGrammar(const OpenAiTools& tools, ToolCallFormat format,
                                             const GrammarLimits& limits = {},
                                             const std::string& lead = "");

// A chat's constraint (`grammar`, `json_schema` or `choice` as the request
// set it) as a grammar whose text starts with the literal `lead`: a prompt
// that opened the reasoning has it closed at once ("</think>\n\n"), so that
// the constrained text is the answer (content), not reasoning. The request
// is left as it was when it has no constraint.
absl::Status PutConstraintAfterLead(v1::GenerateRequest& request, const std::string& lead,
                                    const GrammarLimits& limits = {});

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_TOOL_CALL_GRAMMAR_H_
