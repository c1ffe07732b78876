#ifndef LINSERVE_SERVER_OPENAI_TOOLS_H_
#define LINSERVE_SERVER_OPENAI_TOOLS_H_

// OpenAI's tool calling on top of constrained generation: a request's
// `tools` and `tool_choice` become a grammar that makes the assistant's turn
// a call (or, for "auto", either a call or text that does not start one),
// and a finished turn's text becomes `tool_calls`.
//
// A call is written as the chat template declares (chat_template.json
// "tools": call_start, the JSON {"name": ..., "arguments": {...}},
// call_end); the arguments fit the function's `parameters` schema.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_limits.h"
#include "server/http/chat_template.h"
#include "server/http/openai_request_json.h"
#include "server/http/tool_call_parser.h"

namespace linserve {

struct OpenAiTools {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  Choice choice = Choice::kNone;
  std::vector<RequestJson> functions;  // each {"name", "description"?, "parameters"?}
  std::string named;                   // kNamed: the function's name
  // How the model writes its calls (the chat template's format, or
  // --tool_call_format), and how many of a turn's calls are kept
  // (parallel_tool_calls = false: 1).
  ToolCallFormat format = ToolCallFormat::kLinserve;
  int32_t max_calls = 1;

  bool active() const { return choice != Choice::kNone; }
};

// `tools`, `tool_choice` and `parallel_tool_calls` as sent (null: absent).
// INVALID_ARGUMENT names the field: a tool that is not {"type": "function",
// "function": {"name", ...}}, a name outside [a-zA-Z0-9_-]{1,64} or given
// twice, parameters that are not a schema object, a tool_choice naming no
// tool, tool_choice without tools, parallel_tool_calls = true where the
// format makes one call per turn (linserve's). Without tool_choice, tools
// mean "auto", as OpenAI's; in a format with several calls a turn,
// parallel_tool_calls is true unless sent false.
absl::StatusOr<OpenAiTools> ReadTools(const RequestJson* tools, const RequestJson* tool_choice,
                                      const RequestJson* parallel_tool_calls,
                                      ToolCallFormat format = ToolCallFormat::kLinserve);

// The tools as the template's list shows them: one function's JSON per line.
std::string ToolListText(const OpenAiTools& tools);

// The GBNF of the assistant's turn. "auto" needs a template that declares
// tools (how a call starts); without one it is INVALID_ARGUMENT saying so.
// A schema keyword the grammar cannot honour is INVALID_ARGUMENT naming the
// tool.
// `limits`: the server's, as for a json_schema constraint.
absl::StatusOr<std::string> ToolGrammar(const OpenAiTools& tools, const ChatTemplate& chat,
                                        const GrammarLimits& limits = {});

// A call as an assistant message renders it, and as a turn writes it.
std::string ToolCallText(const ChatTemplate& chat, std::string_view name,
                         std::string_view arguments_json);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text, as OpenAI's function.arguments
};
// The call a finished turn's text holds; nullopt when the text is not a
// whole call (an "auto" turn that answered in text, a turn cut by
// max_tokens).
std::optional<ParsedToolCall> ParseToolCall(const ChatTemplate& chat, std::string_view text);

// A fresh call id, "call_" and 24 hex digits.
std::string NewToolCallId();

}  // namespace linserve

#endif  // LINSERVE_SERVER_OPENAI_TOOLS_H_
