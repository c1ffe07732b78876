#ifndef LINSERVE_SERVER_HTTP_TOOL_CALL_PARSER_H_
#define LINSERVE_SERVER_HTTP_TOOL_CALL_PARSER_H_

// A model's tool calls, found in its answer as the text streams and turned
// into OpenAI's `tool_calls` (vLLM's --tool-call-parser names):
//   qwen3_coder  Qwen3.5's XML: <tool_call>\n<function=NAME>\n
//                <parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
//   hermes       Qwen3's JSON: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   linserve     a chat_template.json's call_start + the same JSON + call_end
// (handled by openai_tools.h, one call a turn, the whole turn).

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

enum class ToolCallFormat { kLinserve, kHermes, kQwen3Coder };

// "linserve", "hermes", "qwen3_coder" (--tool_call_format).
absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name);
const char* ToolCallFormatName(ToolCallFormat format);

// One OpenAI tool_calls delta. A call's first delta has its name (and
// empty arguments); later ones carry fragments of its arguments, whose
// concatenation is the call's arguments as JSON text.
struct ToolCallDelta {
  int32_t index = 0;
  std::string name;  // set on the call's first delta only
  std::string arguments;
};

// Parses one answer whatever its pieces: every split of a text gives the
// same content and the same calls as the text pushed whole (the tests push
// it at every byte boundary). Text outside calls is content; the
// whitespace around a call is dropped. An XML call is sent as it arrives:
// its name once its <function=...> line is read, then each parameter once
// its </parameter> is, converted to the JSON type its schema gives. A JSON
// (hermes) call written {"name": ..., "arguments": {...}} is sent as it
// arrives too: its name once the arguments' brace is read, then each
// argument once its value is whole. A JSON call of another shape (the
// arguments first, or as a string) is sent once its closing tag is read. A
// call whose start is not the format's (or, hermes, whose JSON is not
// {"name", "arguments"}) is left as content and counted in malformed(); a
// value that does not convert stays a string and is counted in
// unconverted(). A call cut by the turn's end keeps the parameters it has;
// garbage inside one ends it, the rest being content. Not thread-safe.
class ToolCallParser {
 public:
  // `functions`: the request's tools, each {"name", "parameters"?} (the
  // schemas that type the XML parameters). `max_calls`: calls past it are
  // parsed and dropped (parallel_tool_calls = false: 1).
  ToolCallParser(ToolCallFormat format, std::vector<nlohmann::ordered_json> functions,
                 int32_t max_calls = 1 << 30);

  struct Step {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  // What can no longer change; bytes that may still start a tag wait.
  Step Push(std::string_view text);
  // The answer ended: whatever waits.
  Step Flush();

  int32_t calls() const { return std::min(calls_, max_calls_); }
  int64_t malformed() const { return malformed_; }
  int64_t unconverted() const { return unconverted_; }

 private:
  enum class Phase {
    kText,
    kCallStart,
    kJsonHead,       // hermes: {"name": "...", "arguments": {
    kJsonArguments,  // hermes: the arguments, one member at a time
    kJsonTail,       // hermes: the call's closing brace and tag
    kJsonCall,       // hermes, another shape: the whole call at its closing tag
    kBody,
    kParameter,
    kAfterFunction
  };
  // Consumes held_ as far as it can; `at_end`: nothing more will come.
  void Run(Step& out, bool at_end);
  // Each returns false when it needs more bytes.
  bool RunText(Step& out, bool at_end);
  bool RunCallStart(Step& out, bool at_end);
  bool RunJsonHead(Step& out, bool at_end);
  bool RunJsonArguments(Step& out, bool at_end);
  bool RunJsonTail(Step& out, bool at_end);
  bool RunJsonCall(Step& out, bool at_end);
  bool RunBody(Step& out, bool at_end);
  bool RunParameter(Step& out, bool at_end);
  bool RunAfterFunction(Step& out, bool at_end);
  // The call being read was not one: its start tag goes back to content.
  void Malformed(Step& out);
  void OpenCall(Step& out, std::string name);
  void AddArguments(Step& out, std::string fragment);
  void CloseCall(Step& out);
  // An XML parameter's value, as the JSON its schema's type gives.
  std::string ConvertValue(const std::string& key, std::string_view value);

  const ToolCallFormat format_;
  const std::vector<nlohmann::ordered_json> functions_;
  const int32_t max_calls_;
  Phase phase_ = Phase::kText;
  std::string held_;          // bytes not yet consumed
  std::string space_before_;  // the whitespace before the open call's tag
  bool drop_space_ = true;    // whitespace here is dropped (after a call)
  std::string function_;      // the open XML call's name
  std::string parameter_;     // the open parameter's name
  int32_t parameters_ = 0;    // parameters sent in the open call
  // Hermes arguments: how far held_ was scanned for the open member's end,
  // and the scan's JSON nesting, string and escape there.
  size_t scanned_ = 0;
  int32_t depth_ = 1;
  bool in_string_ = false;
  bool escaped_ = false;
  int32_t calls_ = 0;         // calls opened
  int64_t malformed_ = 0;
  int64_t unconverted_ = 0;
};

// A whole answer's calls.
struct ParsedToolCalls {
  std::string content;
  struct Call {
    std::string name;
    std::string arguments;
  };
  std::vector<Call> calls;
  int64_t malformed = 0;
  int64_t unconverted = 0;
};
ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::vector<nlohmann::ordered_json> functions,
                               std::string_view text, int32_t max_calls = 1 << 30);

// Gathers deltas into whole calls (what a stream's client assembles).
void AppendToolCallDeltas(const std::vector<ToolCallDelta>& deltas,
                          std::vector<ParsedToolCalls::Call>& calls);

// The format a template's text shows: "<function=" → qwen3_coder,
// "<tool_call>" → hermes; otherwise linserve.
ToolCallFormat DetectToolCallFormat(std::string_view template_source);

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_TOOL_CALL_PARSER_H_
