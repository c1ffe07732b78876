#include "server/http/openai_tools.h"

#include <cctype>

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"

namespace linserve {
namespace {

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

bool IsToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

const RequestJson* Find(const RequestJson& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// Text that does not begin with `prefix`: each level has matched the
// prefix's first k characters and may end, leave the prefix, or go on with
// its next character, except the last, which cannot complete it.
std::string NotStartingWith(const std::string& prefix) {
  std::vector<uint32_t> chars;
  for (size_t i = 0; i < prefix.size();) {
    const auto byte = static_cast<unsigned char>(prefix[i]);
    const int length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
    uint32_t c = length == 1 ? byte : byte & (0x3F >> (length - 1));
    for (int k = 1; k < length && i + k < prefix.size(); ++k) {
      c = c << 6 | (static_cast<unsigned char>(prefix[i + k]) & 0x3F);
    }
    chars.push_back(c);
    i += length;
  }
  std::string rules = "free-any ::= .*\n";
  for (size_t k = 0; k < chars.size(); ++k) {
    const std::string c = absl::StrFormat("\\U%08X", chars[k]);
    absl::StrAppend(&rules, "free-", k, " ::= \"\" | [^", c, "] free-any");
    if (k + 1 < chars.size()) absl::StrAppend(&rules, " | [", c, "] free-", k + 1);
    rules += "\n";
  }
  return rules;
}

}  // namespace

absl::StatusOr<OpenAiTools> ReadTools(const RequestJson* tools, const RequestJson* tool_choice,
                                      const RequestJson* parallel_tool_calls,
                                      ToolCallFormat format) {
  OpenAiTools out;
  out.format = format;
  if (format == ToolCallFormat::kLinserve) {
    if (parallel_tool_calls != nullptr &&
        (!parallel_tool_calls->is_boolean() || parallel_tool_calls->get<bool>())) {
      return Invalid("parallel_tool_calls = true is not supported (one call per turn); send false");
    }
  } else {
    if (parallel_tool_calls != nullptr && !parallel_tool_calls->is_boolean()) {
      return Invalid("parallel_tool_calls must be true or false");
    }
    const bool parallel = parallel_tool_calls == nullptr || parallel_tool_calls->get<bool>();
    out.max_calls = parallel ? 1 << 30 : 1;
  }
  const bool none = tool_choice != nullptr && tool_choice->is_string() && *tool_choice == "none";
  if (tools == nullptr || (tools->is_array() && tools->empty())) {
    if (tool_choice != nullptr && !none) return Invalid("tool_choice is set but tools is empty");
    return out;
  }
  if (!tools->is_array()) return Invalid("tools must be a list");
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    const RequestJson& tool = (*tools)[i];
    const std::string at = absl::StrCat("tools[", i, "]");
    const RequestJson* type = tool.is_object() ? Find(tool, "type") : nullptr;
    const RequestJson* function = tool.is_object() ? Find(tool, "function") : nullptr;
    if (type == nullptr || *type != "function" || function == nullptr || !function->is_object()) {
      return Invalid(at + " must be {\"type\": \"function\", \"function\": {...}}");
    }
    const RequestJson* name = Find(*function, "name");
    if (name == nullptr || !name->is_string() || !IsToolName(name->get<std::string>())) {
      return Invalid(at + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -");
    }
    if (!names.insert(name->get<std::string>()).second) {
      return Invalid(absl::StrCat(at, ".function.name \"", name->get<std::string>(),
                                  "\" is given twice"));
    }
    RequestJson shown = {{"name", *name}};
    if (const RequestJson* description = Find(*function, "description"); description != nullptr) {
      if (!description->is_string()) return Invalid(at + ".function.description must be a string");
      shown["description"] = *description;
    }
    const RequestJson* parameters = Find(*function, "parameters");
    if (parameters != nullptr && !parameters->is_object()) {
      return Invalid(at + ".function.parameters must be a JSON schema object");
    }
    shown["parameters"] = parameters != nullptr
                              ? *parameters
                              : RequestJson{{"type", "object"}, {"properties", RequestJson::object()}};
    out.functions.push_back(std::move(shown));
  }
  out.choice = OpenAiTools::Choice::kAuto;
  if (tool_choice == nullptr) return out;
  if (tool_choice->is_string()) {
    const std::string choice = tool_choice->get<std::string>();
    if (choice == "none") {
      out.choice = OpenAiTools::Choice::kNone;
    } else if (choice == "required") {
      out.choice = OpenAiTools::Choice::kRequired;
    } else if (choice != "auto") {
      return Invalid(absl::StrCat("tool_choice = \"", choice.substr(0, 64),
                                  "\" is not none, auto, required or a function"));
    }
    return out;
  }
  const RequestJson* function = tool_choice->is_object() ? Find(*tool_choice, "function") : nullptr;
  const RequestJson* name =
      function != nullptr && function->is_object() ? Find(*function, "name") : nullptr;
  if (name == nullptr || !name->is_string()) {
    return Invalid("tool_choice must be none, auto, required or {\"type\": \"function\", "
                   "\"function\": {\"name\": ...}}");
  }
  if (!names.contains(name->get<std::string>())) {
    return Invalid(absl::StrCat("tool_choice names \"", name->get<std::string>().substr(0, 64),
                                "\", which is not in tools"));
  }
  out.choice = OpenAiTools::Choice::kNamed;
  out.named = name->get<std::string>();
  return out;
}

std::string ToolListText(const OpenAiTools& tools) {
  std::string text;
  for (const RequestJson& function : tools.functions) {
    if (!text.empty()) text += "\n";
    text += function.dump(-1, ' ', false, RequestJson::error_handler_t::replace);
  }
  return text;
}

absl::StatusOr<std::string> ToolGrammar(const OpenAiTools& tools, const ChatTemplate& chat,
                                        const GrammarLimits& limits) {
  const ChatTemplate::Tools* shown = chat.tools();
  if (tools.choice == OpenAiTools::Choice::kAuto && shown == nullptr) {
    return Invalid(
        "tool_choice = \"auto\" needs a chat template that declares how a call starts "
        "(chat_template.json \"tools\"), which this model's has not; send tool_choice "
        "\"required\" or a function");
  }
  RequestJson calls = RequestJson::array();
  for (const RequestJson& function : tools.functions) {
    if (tools.choice == OpenAiTools::Choice::kNamed && function["name"] != tools.named) continue;
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", function["name"]}}},
                                     {"arguments", function["parameters"]}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
  }
  JsonSchemaOptions options;
  options.limits = limits;
  absl::StatusOr<std::string> call = JsonSchemaToGbnf(RequestJson{{"anyOf", calls}}, options);
  if (!call.ok()) return Invalid(absl::StrCat("tools: ", call.status().message()));
  // The schema's own root becomes the call's rule.
  std::string gbnf = "tool-call" + call->substr(std::string("root").size());
  const std::string start = shown != nullptr ? shown->call_start : "";
  const std::string end = shown != nullptr ? shown->call_end : "";
  std::string root = absl::StrCat("root ::= ", start.empty() ? "" : GbnfLiteral(start) + " ",
                                  "tool-call", end.empty() ? "" : " " + GbnfLiteral(end));
  if (tools.choice == OpenAiTools::Choice::kAuto) {
    absl::StrAppend(&root, " | free-0\n", NotStartingWith(start));
  } else {
    root += "\n";
  }
  return root + gbnf;
}

std::string ToolCallText(const ChatTemplate& chat, std::string_view name,
                         std::string_view arguments_json) {
  const ChatTemplate::Tools* shown = chat.tools();
  return absl::StrCat(shown != nullptr ? shown->call_start : "", "{\"name\": ",
                      RequestJson(std::string(name)).dump(), ", \"arguments\": ",
                      std::string(arguments_json), "}", shown != nullptr ? shown->call_end : "");
}

std::optional<ParsedToolCall> ParseToolCall(const ChatTemplate& chat, std::string_view text) {
  if (const ChatTemplate::Tools* shown = chat.tools(); shown != nullptr) {
    if (text.substr(0, shown->call_start.size()) != shown->call_start) return std::nullopt;
    text.remove_prefix(shown->call_start.size());
    if (text.size() < shown->call_end.size() ||
        text.substr(text.size() - shown->call_end.size()) != shown->call_end) {
      return std::nullopt;
    }
    text.remove_suffix(shown->call_end.size());
  } else {
    // A Jinja template's model (Hermes JSON, as Qwen3 writes it): the answer
    // after any reasoning, one call in <tool_call>...</tool_call>.
    if (const size_t think = text.rfind("</think>"); think != std::string_view::npos) {
      text.remove_prefix(think + 8);
    }
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    constexpr std::string_view kStart = "<tool_call>", kEnd = "</tool_call>";
    if (text.size() >= kStart.size() + kEnd.size() && text.substr(0, kStart.size()) == kStart &&
        text.substr(text.size() - kEnd.size()) == kEnd) {
      text = text.substr(kStart.size(), text.size() - kStart.size() - kEnd.size());
    }
  }
  const RequestJson call = RequestJson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object()) return std::nullopt;
  const RequestJson* name = Find(call, "name");
  const RequestJson* arguments = Find(call, "arguments");
  if (name == nullptr || !name->is_string() || arguments == nullptr) return std::nullopt;
  return ParsedToolCall{name->get<std::string>(),
                        arguments->dump(-1, ' ', false, RequestJson::error_handler_t::replace)};
}

std::string NewToolCallId() {
  absl::BitGen gen;
  return absl::StrFormat("call_%016x%08x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint32_t>(gen));
}

}  // namespace linserve
