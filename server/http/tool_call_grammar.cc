#include "server/http/tool_call_grammar.h"

#include <cctype>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"

namespace linserve {
namespace {

// `gbnf` with every rule name prefixed, so that several compiled schemas
// live in one grammar. Literals, character classes, repetition counts and
// comments are copied as they are.
std::string PrefixRules(const std::string& gbnf, const std::string& prefix) {
  std::string out;
  for (size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[' || c == '{') {
      const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
      size_t end = i + 1;
      while (end < gbnf.size() && gbnf[end] != close) end += gbnf[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, gbnf.size());
      out.append(gbnf, i, end - i);
      i = end;
    } else if (c == '#') {
      const size_t end = std::min(gbnf.find('\n', i), gbnf.size());
      out.append(gbnf, i, end - i);
      i = end;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = i;
      while (end < gbnf.size() && (std::isalnum(static_cast<unsigned char>(gbnf[end])) ||
                                   gbnf[end] == '_' || gbnf[end] == '-')) {
        ++end;
      }
      absl::StrAppend(&out, prefix, gbnf.substr(i, end - i));
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

const RequestJson* Find(const RequestJson& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// Rule `rule` for one XML parameter's value, and the rules it needs.
absl::StatusOr<std::string> ValueRules(const std::string& rule, const RequestJson& schema,
                                       const GrammarLimits& limits) {
  const RequestJson* type = Find(schema, "type");
  const RequestJson* choices = Find(schema, "enum");
  const bool string_enum = choices != nullptr && choices->is_array() && !choices->empty() &&
                           std::all_of(choices->begin(), choices->end(),
                                       [](const RequestJson& v) { return v.is_string(); });
  if ((type == nullptr || *type == "string") && string_enum) {
    std::string body;
    for (const RequestJson& v : *choices) {
      absl::StrAppend(&body, body.empty() ? "" : " | ", GbnfLiteral(v.get<std::string>()));
    }
    return absl::StrCat(rule, " ::= ", body, "\n");
  }
  const bool json_typed = type != nullptr && type->is_string() && *type != "string";
  if (!json_typed) {
    // The value's own text: it cannot hold '<' (the closing tag's start).
    const RequestJson* max_length = Find(schema, "maxLength");
    if (max_length != nullptr && max_length->is_number_unsigned()) {
      return absl::StrCat(rule, " ::= [^<]{0,", max_length->get<uint64_t>(), "}\n");
    }
    return absl::StrCat(rule, " ::= [^<]*\n");
  }
  JsonSchemaOptions options;
  options.limits = limits;
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema, options);
  if (!gbnf.ok()) return gbnf.status();
  return absl::StrCat(rule, " ::= ", rule, "-root\n", PrefixRules(*gbnf, rule + "-"));
}

// One function's XML call, as rule `rule`.
absl::StatusOr<std::string> XmlFunctionRules(const std::string& rule, const RequestJson& function,
                                             const GrammarLimits& limits) {
  const std::string name = function["name"].get<std::string>();
  std::string body = GbnfLiteral("<function=" + name + ">\n");
  std::string rules;
  const RequestJson& parameters = function["parameters"];
  const RequestJson* properties = Find(parameters, "properties");
  const RequestJson* required = Find(parameters, "required");
  if (properties != nullptr && properties->is_object()) {
    int k = 0;
    for (const auto& [key, schema] : properties->items()) {
      const std::string parameter = absl::StrCat(rule, "-p", k);
      const std::string value = absl::StrCat(rule, "-v", k++);
      absl::StatusOr<std::string> value_rules = ValueRules(value, schema, limits);
      if (!value_rules.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("tools: function \"", name,
                                                       "\" parameter \"", key,
                                                       "\": ", value_rules.status().message()));
      }
      absl::StrAppend(&rules, parameter, " ::= ", GbnfLiteral("<parameter=" + key + ">\n"), " ",
                      value, " ", GbnfLiteral("\n</parameter>\n"), "\n", *value_rules);
      bool needed = false;
      if (required != nullptr && required->is_array()) {
        for (const RequestJson& r : *required) needed = needed || r == key;
      }
      absl::StrAppend(&body, " ", parameter, needed ? "" : "?");
    }
  }
  absl::StrAppend(&body, " ", GbnfLiteral("</function>\n"));
  return absl::StrCat(rule, " ::= ", body, "\n", rules);
}

}  // namespace

absl::StatusOr<std::string> ModelToolGrammar(const OpenAiTools& tools, ToolCallFormat format,
                                             const GrammarLimits& limits, const std::string& lead) {
  std::string calls, rules;
  int index = 0;
  RequestJson json_calls = RequestJson::array();
  for (const RequestJson& function : tools.functions) {
    if (tools.choice == OpenAiTools::Choice::kNamed && function["name"] != tools.named) continue;
    if (format == ToolCallFormat::kQwen3Coder) {
      const std::string rule = absl::StrCat("fn", index++);
      absl::StatusOr<std::string> function_rules = XmlFunctionRules(rule, function, limits);
      if (!function_rules.ok()) return function_rules.status();
      absl::StrAppend(&calls, calls.empty() ? "" : " | ", rule);
      rules += *function_rules;
    } else {
      json_calls.push_back(
          {{"type", "object"},
           {"properties",
            {{"name", {{"const", function["name"]}}}, {"arguments", function["parameters"]}}},
           {"required", {"name", "arguments"}},
           {"additionalProperties", false}});
    }
  }
  if (format == ToolCallFormat::kHermes) {
    JsonSchemaOptions options;
    options.limits = limits;
    absl::StatusOr<std::string> call =
        JsonSchemaToGbnf(RequestJson{{"anyOf", json_calls}}, options);
    if (!call.ok())
      return absl::InvalidArgumentError(absl::StrCat("tools: ", call.status().message()));
    calls = "call-root";
    rules = PrefixRules(*call, "call-");
  }
  std::string root = absl::StrCat(
      "tool-call ::= ", GbnfLiteral("<tool_call>\n"), " (", calls, ") ",
      GbnfLiteral(format == ToolCallFormat::kHermes ? "\n</tool_call>" : "</tool_call>"), "\n");
  const std::string first =
      absl::StrCat("root ::= ", lead.empty() ? "" : GbnfLiteral(lead) + " ",
                   tools.max_calls > 1 ? "tool-call (\"\\n\" tool-call)*\n" : "tool-call\n");
  return first + root + rules;
}

absl::Status PutConstraintAfterLead(v1::GenerateRequest& request, const std::string& lead,
                                    const GrammarLimits& limits) {
  std::string gbnf;
  switch (request.constraint_case()) {
    case v1::GenerateRequest::kGrammar:
      gbnf = request.grammar();
      break;
    case v1::GenerateRequest::kJsonSchema: {
      JsonSchemaOptions options;
      options.limits = limits;
      absl::StatusOr<std::string> compiled = JsonSchemaTextToGbnf(request.json_schema(), options);
      if (!compiled.ok()) {
        return absl::Status(compiled.status().code(),
                            absl::StrCat("json_schema: ", compiled.status().message()));
      }
      gbnf = *std::move(compiled);
      break;
    }
    case v1::GenerateRequest::kChoice: {
      std::vector<std::string> literals;
      for (const std::string& choice : request.choice().choices()) {
        literals.push_back(GbnfLiteral(choice));
      }
      gbnf = absl::StrCat("root ::= ", absl::StrJoin(literals, " | "), "\n");
      break;
    }
    default:
      return absl::OkStatus();
  }
  request.set_grammar(absl::StrCat("root ::= ", GbnfLiteral(lead), " answer-root\n",
                                   PrefixRules(gbnf, "answer-")));
  return absl::OkStatus();
}

}  // namespace linserve
