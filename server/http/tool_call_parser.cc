#include "server/http/tool_call_parser.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kCallStart = "<tool_call>";
constexpr std::string_view kCallEnd = "</tool_call>";
constexpr std::string_view kFunctionStart = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameterStart = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";
constexpr size_t kMaxNameBytes = 64;
constexpr size_t kMaxParameterNameBytes = 256;

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

size_t SkipSpace(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The longest end of `text` that is a proper beginning of `tag`.
size_t PartialTag(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(text.size(), tag.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string_view Trim(std::string_view text) {
  text.remove_prefix(SkipSpace(text));
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  return text;
}

// `value` as JSON of schema type `type`; "" when it is not one.
std::string Convert(const std::string& type, std::string_view value) {
  if (type == "string") return Dump(Json(std::string(value)));
  const std::string_view trimmed = Trim(value);
  if (type == "boolean") {
    if (trimmed == "true" || trimmed == "True") return "true";
    if (trimmed == "false" || trimmed == "False") return "false";
    return "";
  }
  if (type == "null") return trimmed == "null" || trimmed == "None" ? "null" : "";
  const Json parsed = Json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return "";
  if ((type == "integer" && parsed.is_number_integer()) ||
      (type == "number" && parsed.is_number()) || (type == "object" && parsed.is_object()) ||
      (type == "array" && parsed.is_array())) {
    return Dump(parsed);
  }
  return "";
}

}  // namespace

absl::StatusOr<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  if (name == "linserve") return ToolCallFormat::kLinserve;
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "qwen3_coder") return ToolCallFormat::kQwen3Coder;
  return absl::InvalidArgumentError(absl::StrCat("unknown tool call format \"",
                                                 std::string(name.substr(0, 64)),
                                                 "\"; use linserve, hermes or qwen3_coder"));
}

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLinserve:
      return "linserve";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kQwen3Coder:
      return "qwen3_coder";
  }
  return "linserve";
}

ToolCallFormat DetectToolCallFormat(std::string_view template_source) {
  if (template_source.find(kFunctionStart) != std::string_view::npos) {
    return ToolCallFormat::kQwen3Coder;
  }
  if (template_source.find(kCallStart) != std::string_view::npos) return ToolCallFormat::kHermes;
  return ToolCallFormat::kLinserve;
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::vector<Json> functions,
                               int32_t max_calls)
    : format_(format), functions_(std::move(functions)), max_calls_(max_calls) {}

ToolCallParser::Step ToolCallParser::Push(std::string_view text) {
  Step out;
  held_.append(text);
  Run(out, false);
  return out;
}

ToolCallParser::Step ToolCallParser::Flush() {
  Step out;
  Run(out, true);
  return out;
}

void ToolCallParser::Run(Step& out, bool at_end) {
  for (bool more = true; more;) {
    switch (phase_) {
      case Phase::kText:
        more = RunText(out, at_end);
        break;
      case Phase::kCallStart:
        more = RunCallStart(out, at_end);
        break;
      case Phase::kJsonHead:
        more = RunJsonHead(out, at_end);
        break;
      case Phase::kJsonArguments:
        more = RunJsonArguments(out, at_end);
        break;
      case Phase::kJsonTail:
        more = RunJsonTail(out, at_end);
        break;
      case Phase::kJsonCall:
        more = RunJsonCall(out, at_end);
        break;
      case Phase::kBody:
        more = RunBody(out, at_end);
        break;
      case Phase::kParameter:
        more = RunParameter(out, at_end);
        break;
      case Phase::kAfterFunction:
        more = RunAfterFunction(out, at_end);
        break;
    }
  }
}

bool ToolCallParser::RunText(Step& out, bool at_end) {
  if (drop_space_) {
    held_.erase(0, SkipSpace(held_));
    if (held_.empty()) return false;
    drop_space_ = false;
  }
  if (const size_t start = held_.find(kCallStart); start != std::string::npos) {
    size_t end = start;
    while (end > 0 && IsSpace(held_[end - 1])) --end;
    out.content.append(held_, 0, end);
    space_before_.assign(held_, end, start - end);
    held_.erase(0, start + kCallStart.size());
    phase_ = format_ == ToolCallFormat::kHermes ? Phase::kJsonHead : Phase::kCallStart;
    return true;
  }
  // Bytes that may begin the tag wait, and so does the whitespace before
  // them (a call's surroundings are dropped).
  size_t safe = held_.size();
  if (!at_end) {
    safe -= PartialTag(held_, kCallStart);
    while (safe > 0 && IsSpace(held_[safe - 1])) --safe;
  }
  out.content.append(held_, 0, safe);
  held_.erase(0, safe);
  return false;
}

bool ToolCallParser::RunCallStart(Step& out, bool at_end) {
  const size_t space = SkipSpace(held_);
  const std::string_view rest = std::string_view(held_).substr(space);
  if (rest.size() < kFunctionStart.size()) {
    if (!at_end && StartsWith(kFunctionStart, rest)) return false;
    Malformed(out);
    return true;
  }
  if (!StartsWith(rest, kFunctionStart)) {
    Malformed(out);
    return true;
  }
  size_t end = kFunctionStart.size();
  while (end < rest.size() && IsNameChar(rest[end])) ++end;
  const size_t length = end - kFunctionStart.size();
  if (length > kMaxNameBytes || (end < rest.size() && (rest[end] != '>' || length == 0))) {
    Malformed(out);
    return true;
  }
  if (end == rest.size()) {
    if (!at_end) return false;
    Malformed(out);
    return true;
  }
  std::string name(rest.substr(kFunctionStart.size(), length));
  held_.erase(0, space + end + 1);
  OpenCall(out, std::move(name));
  phase_ = Phase::kBody;
  return true;
}

namespace {

// How far a hermes call's text matches {"name": "NAME", "arguments": {.
struct JsonHead {
  enum { kNeedMore, kOther, kMatch } result = kNeedMore;
  std::string name;
  size_t end = 0;  // kMatch: just past the arguments' brace
};

JsonHead MatchJsonHead(std::string_view text) {
  JsonHead head;
  size_t i = 0;
  // Each step: kMatch when it was read whole, kNeedMore at the text's end.
  auto literal = [&](std::string_view expected) {
    i += SkipSpace(text.substr(i));
    const size_t n = std::min(expected.size(), text.size() - i);
    if (text.substr(i, n) != expected.substr(0, n)) return JsonHead::kOther;
    i += n;
    return n < expected.size() ? JsonHead::kNeedMore : JsonHead::kMatch;
  };
  for (std::string_view expected : {"{", "\"name\"", ":", "\""}) {
    if (const auto step = literal(expected); step != JsonHead::kMatch) {
      head.result = step;
      return head;
    }
  }
  while (i < text.size() && text[i] != '"') {
    if (!IsNameChar(text[i]) || head.name.size() == kMaxNameBytes) {
      head.result = JsonHead::kOther;
      return head;
    }
    head.name += text[i++];
  }
  if (i == text.size()) return head;
  if (head.name.empty()) {
    head.result = JsonHead::kOther;
    return head;
  }
  ++i;
  for (std::string_view expected : {",", "\"arguments\"", ":", "{"}) {
    if (const auto step = literal(expected); step != JsonHead::kMatch) {
      head.result = step;
      return head;
    }
  }
  head.result = JsonHead::kMatch;
  head.end = i;
  return head;
}

}  // namespace

bool ToolCallParser::RunJsonHead(Step& out, bool at_end) {
  const JsonHead head = MatchJsonHead(held_);
  if (head.result == JsonHead::kNeedMore && !at_end) return false;
  if (head.result != JsonHead::kMatch) {
    phase_ = Phase::kJsonCall;  // another shape, or cut: read whole
    return true;
  }
  OpenCall(out, head.name);
  held_.erase(0, head.end);
  scanned_ = 0;
  depth_ = 1;
  in_string_ = false;
  escaped_ = false;
  phase_ = Phase::kJsonArguments;
  return true;
}

bool ToolCallParser::RunJsonArguments(Step& out, bool at_end) {
  // Scans for the open member's end: a comma in the arguments' object, or
  // its closing brace, outside strings.
  while (scanned_ < held_.size()) {
    const size_t at = scanned_++;
    const char c = held_[at];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
    }
    const bool closes = depth_ == 0;
    if (!closes && !(depth_ == 1 && c == ',')) continue;
    const std::string_view member = Trim(std::string_view(held_).substr(0, at));
    if (!(member.empty() && closes && parameters_ == 0)) {
      const Json one = Json::parse("{" + std::string(member) + "}", nullptr,
                                   /*allow_exceptions=*/false);
      if (one.is_discarded() || one.size() != 1) {
        // Not JSON: the call ends with the arguments it has; the rest is content.
        CloseCall(out);
        ++malformed_;
        phase_ = Phase::kText;
        drop_space_ = false;
        return true;
      }
      AddArguments(out, absl::StrCat(parameters_ == 0 ? "{" : ",", Dump(Json(one.begin().key())),
                                     ":", Dump(one.begin().value())));
      ++parameters_;
    }
    held_.erase(0, at + 1);
    scanned_ = 0;
    if (closes) {
      CloseCall(out);
      phase_ = Phase::kJsonTail;
      return true;
    }
  }
  if (!at_end) return false;
  CloseCall(out);  // cut inside the arguments: it keeps those it has
  held_.clear();
  phase_ = Phase::kText;
  return false;
}

bool ToolCallParser::RunJsonTail(Step& out, bool at_end) {
  const size_t space = SkipSpace(held_);
  if (space == held_.size()) {
    if (!at_end) return false;
    held_.clear();
    phase_ = Phase::kText;
    return false;
  }
  if (held_[space] != '}') {
    // The call's object goes on past its arguments: the rest is content.
    ++malformed_;
    held_.erase(0, space);
    phase_ = Phase::kText;
    drop_space_ = false;
    return true;
  }
  const size_t after = space + 1 + SkipSpace(std::string_view(held_).substr(space + 1));
  const std::string_view rest = std::string_view(held_).substr(after);
  if (StartsWith(rest, kCallEnd)) {
    held_.erase(0, after + kCallEnd.size());
  } else if (!at_end && StartsWith(kCallEnd, rest)) {
    return false;
  } else {
    held_.erase(0, after);  // without its closing tag, what follows is content
  }
  phase_ = Phase::kText;
  drop_space_ = true;
  return true;
}

bool ToolCallParser::RunJsonCall(Step& out, bool at_end) {
  const size_t end = held_.find(kCallEnd);
  if (end == std::string::npos) {
    if (!at_end) return false;
    Malformed(out);
    return true;
  }
  const Json call = Json::parse(Trim(std::string_view(held_).substr(0, end)), nullptr,
                                /*allow_exceptions=*/false);
  const auto name = call.is_object() ? call.find("name") : call.end();
  const auto arguments = call.is_object() ? call.find("arguments") : call.end();
  Json parsed_arguments;
  if (arguments != call.end()) {
    parsed_arguments = arguments->is_string()
                           ? Json::parse(arguments->get<std::string>(), nullptr, false)
                           : *arguments;
  }
  if (name == call.end() || !name->is_string() || name->get<std::string>().empty() ||
      !parsed_arguments.is_object()) {
    Malformed(out);
    return true;
  }
  OpenCall(out, name->get<std::string>());
  AddArguments(out, Dump(parsed_arguments));
  held_.erase(0, end + kCallEnd.size());
  phase_ = Phase::kText;
  drop_space_ = true;
  return true;
}

bool ToolCallParser::RunBody(Step& out, bool at_end) {
  const size_t space = SkipSpace(held_);
  const std::string_view rest = std::string_view(held_).substr(space);
  if (StartsWith(rest, kFunctionEnd)) {
    held_.erase(0, space + kFunctionEnd.size());
    CloseCall(out);
    phase_ = Phase::kAfterFunction;
    return true;
  }
  if (StartsWith(rest, kParameterStart)) {
    const size_t close = rest.find('>', kParameterStart.size());
    const size_t limit = std::min(close, rest.size());
    const std::string_view key =
        rest.substr(kParameterStart.size(), limit - kParameterStart.size());
    const bool bad = key.size() > kMaxParameterNameBytes ||
                     key.find_first_of("<\n") != std::string_view::npos ||
                     (close != std::string_view::npos && key.empty());
    if (!bad && close == std::string_view::npos && !at_end) return false;
    if (!bad && close != std::string_view::npos) {
      parameter_ = std::string(key);
      held_.erase(0, space + close + 1);
      phase_ = Phase::kParameter;
      return true;
    }
  } else if (!at_end && (StartsWith(kFunctionEnd, rest) || StartsWith(kParameterStart, rest))) {
    return false;
  }
  // The turn ended inside the call (max_tokens): it keeps what it has.
  // Anything else ends the call: the rest is content.
  CloseCall(out);
  if (at_end) {
    held_.clear();
  } else {
    ++malformed_;
    held_.erase(0, space);
    drop_space_ = false;
  }
  phase_ = Phase::kText;
  return !at_end;
}

bool ToolCallParser::RunParameter(Step& out, bool at_end) {
  const size_t end = held_.find(kParameterEnd);
  if (end == std::string::npos) {
    if (!at_end) return false;
    CloseCall(out);  // cut inside a value: the value is lost
    held_.clear();
    phase_ = Phase::kText;
    return false;
  }
  std::string_view value = std::string_view(held_).substr(0, end);
  // The format puts the value on its own lines.
  if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  AddArguments(out, absl::StrCat(parameters_ == 0 ? "{" : ",", Dump(Json(parameter_)), ":",
                                 ConvertValue(parameter_, value)));
  ++parameters_;
  held_.erase(0, end + kParameterEnd.size());
  phase_ = Phase::kBody;
  return true;
}

bool ToolCallParser::RunAfterFunction(Step& out, bool at_end) {
  const size_t space = SkipSpace(held_);
  const std::string_view rest = std::string_view(held_).substr(space);
  if (StartsWith(rest, kCallEnd)) {
    held_.erase(0, space + kCallEnd.size());
  } else if (!at_end && StartsWith(kCallEnd, rest)) {
    return false;
  }
  // Without its closing tag, what follows the call is content.
  phase_ = Phase::kText;
  drop_space_ = true;
  return true;
}

void ToolCallParser::Malformed(Step& out) {
  ++malformed_;
  out.content.append(space_before_);
  out.content.append(kCallStart);
  phase_ = Phase::kText;
  drop_space_ = false;
}

void ToolCallParser::OpenCall(Step& out, std::string name) {
  function_ = name;
  parameters_ = 0;
  if (calls_++ < max_calls_) out.calls.push_back({calls_ - 1, std::move(name), ""});
}

void ToolCallParser::AddArguments(Step& out, std::string fragment) {
  if (calls_ > max_calls_) return;
  const int32_t index = calls_ - 1;
  if (!out.calls.empty() && out.calls.back().index == index && out.calls.back().name.empty()) {
    out.calls.back().arguments += fragment;  // one fragment a step
  } else {
    out.calls.push_back({index, "", std::move(fragment)});
  }
}

void ToolCallParser::CloseCall(Step& out) { AddArguments(out, parameters_ == 0 ? "{}" : "}"); }

std::string ToolCallParser::ConvertValue(const std::string& key, std::string_view value) {
  const Json* schema = nullptr;
  for (const Json& function : functions_) {
    const auto name = function.find("name");
    if (name == function.end() || *name != function_) continue;
    const auto parameters = function.find("parameters");
    if (parameters == function.end() || !parameters->is_object()) break;
    const auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) break;
    const auto property = properties->find(key);
    if (property != properties->end() && property->is_object()) schema = &*property;
    break;
  }
  const std::string as_string = Dump(Json(std::string(value)));
  if (schema == nullptr) return as_string;
  const auto type = schema->find("type");
  std::vector<std::string> types;
  if (type != schema->end() && type->is_string()) types.push_back(type->get<std::string>());
  if (type != schema->end() && type->is_array()) {
    for (const Json& t : *type) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  if (types.empty()) return as_string;  // an untyped value is the text itself
  // Every other type before string: "5" for ["string", "integer"] is 5.
  std::stable_partition(types.begin(), types.end(),
                        [](const std::string& t) { return t != "string"; });
  for (const std::string& t : types) {
    if (std::string converted = Convert(t, value); !converted.empty()) return converted;
  }
  ++unconverted_;
  return as_string;
}

ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::vector<Json> functions,
                               std::string_view text, int32_t max_calls) {
  ToolCallParser parser(format, std::move(functions), max_calls);
  ParsedToolCalls out;
  for (const ToolCallParser::Step& step : {parser.Push(text), parser.Flush()}) {
    out.content += step.content;
    AppendToolCallDeltas(step.calls, out.calls);
  }
  out.malformed = parser.malformed();
  out.unconverted = parser.unconverted();
  return out;
}

void AppendToolCallDeltas(const std::vector<ToolCallDelta>& deltas,
                          std::vector<ParsedToolCalls::Call>& calls) {
  for (const ToolCallDelta& delta : deltas) {
    if (calls.size() <= static_cast<size_t>(delta.index)) calls.resize(delta.index + 1);
    ParsedToolCalls::Call& call = calls[delta.index];
    if (!delta.name.empty()) call.name = delta.name;
    call.arguments += delta.arguments;
  }
}

}  // namespace linserve
