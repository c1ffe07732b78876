#include "server/http/chat_session_messages.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

absl::Status NotOurs(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("the session's chat messages were not written by this server: ", what));
}

}  // namespace

std::string EncodeChatTurnContext(const ChatTurnContext& context) {
  RequestJson out = {{"messages", context.messages},
                     {"reasoning_opened", context.reasoning_opened}};
  if (context.tool_format != ToolCallFormat::kLinserve) {
    out["tool_call_format"] = ToolCallFormatName(context.tool_format);
    out["functions"] = context.functions;
    out["max_calls"] = context.max_calls;
  }
  return out.dump();
}

absl::StatusOr<RequestJson> ChatSessionMessages(const SessionChat& chat,
                                                ReasoningFormat reasoning) {
  if (chat.empty()) return RequestJson::array();
  const RequestJson context = RequestJson::parse(chat.context, nullptr, /*allow_exceptions=*/false);
  if (!context.is_object()) return NotOurs("not a JSON object");
  const auto messages = context.find("messages");
  if (messages == context.end() || !messages->is_array()) return NotOurs("no list of messages");
  const auto opened = context.find("reasoning_opened");
  if (opened == context.end() || !opened->is_boolean()) return NotOurs("no reasoning_opened");

  // The answer as its response read it: reasoning apart, then calls.
  ReasoningSplitter splitter(reasoning, opened->get<bool>());
  ReasoningSplitter::Split split = splitter.Push(chat.reply);
  ReasoningSplitter::Split rest = splitter.Flush();
  split.reasoning += rest.reasoning;
  split.content += rest.content;
  RequestJson answer = {{"role", "assistant"},
                        {"content", split.content},
                        {"reasoning_content",
                         split.reasoning.empty() ? RequestJson() : RequestJson(split.reasoning)}};
  if (const auto format_name = context.find("tool_call_format"); format_name != context.end()) {
    const auto functions = context.find("functions");
    const auto max_calls = context.find("max_calls");
    if (!format_name->is_string() || functions == context.end() || !functions->is_array() ||
        max_calls == context.end() || !max_calls->is_number_integer()) {
      return NotOurs("a malformed tool list");
    }
    absl::StatusOr<ToolCallFormat> format = ParseToolCallFormat(format_name->get<std::string>());
    if (!format.ok()) return NotOurs(format.status().message());
    ParsedToolCalls parsed =
        ParseToolCalls(*format, functions->get<std::vector<RequestJson>>(), split.content,
                       max_calls->get<int32_t>());
    if (!parsed.calls.empty()) {
      answer["content"] = parsed.content.empty() ? RequestJson() : RequestJson(parsed.content);
      answer["tool_calls"] = RequestJson::array();
      for (size_t i = 0; i < parsed.calls.size(); ++i) {
        // As the template reads a client's calls: the arguments as the object
        // they hold. The ids the client was sent were random; these stand in.
        RequestJson arguments = RequestJson::parse(parsed.calls[i].arguments, nullptr,
                                                   /*allow_exceptions=*/false);
        if (arguments.is_discarded()) arguments = parsed.calls[i].arguments;
        answer["tool_calls"].push_back(
            {{"id", absl::StrCat("call_", i)},
             {"type", "function"},
             {"function", {{"name", parsed.calls[i].name}, {"arguments", std::move(arguments)}}}});
      }
    }
  }
  RequestJson out = *messages;
  out.push_back(std::move(answer));
  return out;
}

}  // namespace linserve
