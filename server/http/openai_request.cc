#include "server/http/openai_request.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "server/common/reasoning_split.h"
#include "server/http/tool_call_grammar.h"

namespace linserve {
namespace {

using Json = RequestJson;

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

// The body's fields, read one at a time; what is left afterwards was not
// understood.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}

  // The field, or null when absent or JSON null (OpenAI clients send nulls
  // for unset fields).
  const Json* Get(const std::string& name) {
    seen_.insert(name);
    const auto it = body_.find(name);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::Status Number(const std::string& name, std::function<void(float)> set) {
    const Json* v = Get(name);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number()) return Invalid(absl::StrCat(name, " must be a number"));
    set(v->get<float>());
    return absl::OkStatus();
  }

  absl::Status Integer(const std::string& name, int64_t min, int64_t max,
                       std::function<void(int64_t)> set) {
    const Json* v = Get(name);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_number_integer()) return Invalid(absl::StrCat(name, " must be an integer"));
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return Invalid(
          absl::StrCat(name, " = ", v->get<uint64_t>(), " is outside [", min, ", ", max, "]"));
    }
    const int64_t value = v->get<int64_t>();
    if (value < min || value > max) {
      return Invalid(absl::StrCat(name, " = ", value, " is outside [", min, ", ", max, "]"));
    }
    set(value);
    return absl::OkStatus();
  }

  absl::Status Bool(const std::string& name, bool* out) {
    const Json* v = Get(name);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_boolean()) return Invalid(absl::StrCat(name, " must be true or false"));
    *out = v->get<bool>();
    return absl::OkStatus();
  }

  absl::Status String(const std::string& name, std::string* out) {
    const Json* v = Get(name);
    if (v == nullptr) return absl::OkStatus();
    if (!v->is_string()) return Invalid(absl::StrCat(name, " must be a string"));
    *out = v->get<std::string>();
    return absl::OkStatus();
  }

  // The unread names in `listed` (OpenAiRequest's bounds) and their count.
  void Unread(std::vector<std::string>* listed, size_t* count) const {
    *count = 0;
    for (const auto& [name, value] : body_.items()) {
      if (seen_.contains(name)) continue;
      if (++*count <= OpenAiRequest::kListedIgnoredFields) {
        listed->push_back(name.substr(0, OpenAiRequest::kListedIgnoredFieldBytes));
      }
    }
  }

 private:
  const Json& body_;
  absl::flat_hash_set<std::string> seen_;
};

// Fields that would change the result but are not supported: refused, not
// ignored, so a client never silently gets something else.
absl::Status RefuseUnsupported(Fields& f) {
  bool echo = false;
  LINSERVE_RETURN_IF_ERROR(f.Bool("echo", &echo));
  if (echo) return Invalid("echo = true is not supported");
  if (const Json* suffix = f.Get("suffix"); suffix != nullptr && suffix->dump() != "\"\"") {
    return Invalid("suffix is not supported");
  }
  // The legacy function-calling fields; tools and tool_choice replace them.
  if (const Json* v = f.Get("functions"); v != nullptr && !(v->is_array() && v->empty())) {
    return Invalid("functions is not supported; send tools");
  }
  if (const Json* v = f.Get("function_call");
      v != nullptr && !(v->is_string() && v->get<std::string>() == "none")) {
    return Invalid("function_call is not supported; send tool_choice");
  }
  return absl::OkStatus();
}

// OpenAI's response_format and vLLM's structured_outputs, as the gRPC
// request's constraint (validated there, as every constraint is).
absl::Status ReadConstraint(Fields& f, v1::GenerateRequest& out) {
  int given = 0;
  if (const Json* format = f.Get("response_format"); format != nullptr) {
    // find(), not value(): value() throws on a "type" that is not a string.
    const auto type = format->is_object() ? format->find("type") : format->end();
    if (type == format->end() || !type->is_string()) {
      return Invalid("response_format must be an object with a string \"type\"");
    }
    if (*type == "json_object") {
      out.set_json_schema(R"({"type": "object"})");
      ++given;
    } else if (*type == "json_schema") {
      const auto spec = format->find("json_schema");
      if (spec == format->end() || !spec->is_object() || !spec->contains("schema") ||
          !(*spec)["schema"].is_object()) {
        return Invalid("response_format.json_schema must be an object with an object \"schema\"");
      }
      out.set_json_schema((*spec)["schema"].dump());
      ++given;
    } else if (*type != "text") {
      return Invalid(absl::StrCat("response_format.type = ", type->dump(),
                                  " is not one of \"text\", \"json_object\", \"json_schema\""));
    }
  }
  if (const Json* outputs = f.Get("structured_outputs"); outputs != nullptr) {
    if (!outputs->is_object()) return Invalid("structured_outputs must be an object");
    for (const auto& [key, value] : outputs->items()) {
      if (value.is_null()) continue;
      ++given;
      if (key == "grammar" && value.is_string()) {
        out.set_grammar(value.get<std::string>());
      } else if (key == "json" && (value.is_object() || value.is_string())) {
        out.set_json_schema(value.is_string() ? value.get<std::string>() : value.dump());
      } else if (key == "choice" && value.is_array()) {
        v1::Choices* choices = out.mutable_choice();
        for (const Json& choice : value) {
          if (!choice.is_string()) return Invalid("structured_outputs.choice must list strings");
          choices->add_choices(choice.get<std::string>());
        }
      } else {
        return Invalid(absl::StrCat("structured_outputs.", key,
                                    " is not supported (grammar: a GBNF string, json: a schema, "
                                    "choice: a list of strings)"));
      }
    }
  }
  if (given > 1) {
    return Invalid("response_format and structured_outputs ask for more than one constraint; send one");
  }
  if (const Json* bias = f.Get("logit_bias"); bias != nullptr) {
    if (!bias->is_object()) return Invalid("logit_bias must be an object of token id -> bias");
    auto& map = *out.mutable_logit_bias();
    for (const auto& [key, value] : bias->items()) {
      int32_t id = 0;
      if (!absl::SimpleAtoi(key, &id)) {
        return Invalid(absl::StrCat("logit_bias: \"", key.substr(0, 32), "\" is not a token id"));
      }
      if (!value.is_number()) return Invalid(absl::StrCat("logit_bias[", id, "] must be a number"));
      map[id] = value.get<float>();
    }
  }
  return absl::OkStatus();
}

absl::Status ReadStop(Fields& f, v1::GenerateRequest& out) {
  const Json* stop = f.Get("stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->is_string()) {
    out.add_stop(stop->get<std::string>());
    return absl::OkStatus();
  }
  if (!stop->is_array()) return Invalid("stop must be a string or a list of strings");
  for (const Json& s : *stop) {
    if (!s.is_string()) return Invalid("stop must be a string or a list of strings");
    out.add_stop(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(Fields& f, v1::GenerateRequest& out) {
  v1::SamplingParams& s = *out.mutable_sampling();
  LINSERVE_RETURN_IF_ERROR(f.Number("temperature", [&](float v) { s.set_temperature(v); }));
  LINSERVE_RETURN_IF_ERROR(f.Number("top_p", [&](float v) { s.set_top_p(v); }));
  LINSERVE_RETURN_IF_ERROR(f.Number("min_p", [&](float v) { s.set_min_p(v); }));
  // -1 is "off" to vLLM's clients, as 0 is here.
  LINSERVE_RETURN_IF_ERROR(f.Integer("top_k", -1, std::numeric_limits<int32_t>::max(),
                                     [&](int64_t v) { s.set_top_k(v < 0 ? 0 : v); }));
  LINSERVE_RETURN_IF_ERROR(
      f.Number("repetition_penalty", [&](float v) { s.set_repetition_penalty(v); }));
  LINSERVE_RETURN_IF_ERROR(
      f.Number("presence_penalty", [&](float v) { s.set_presence_penalty(v); }));
  LINSERVE_RETURN_IF_ERROR(
      f.Number("frequency_penalty", [&](float v) { s.set_frequency_penalty(v); }));
  LINSERVE_RETURN_IF_ERROR(f.Integer("seed", 0, std::numeric_limits<int64_t>::max(),
                                     [&](int64_t v) { s.set_seed(static_cast<uint64_t>(v)); }));
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    LINSERVE_RETURN_IF_ERROR(
        f.Integer(name, 1, int32_max, [&](int64_t v) { out.set_max_new_tokens(v); }));
  }
  bool ignore_eos = false;
  LINSERVE_RETURN_IF_ERROR(f.Bool("ignore_eos", &ignore_eos));
  out.set_ignore_eos(ignore_eos);
  if (f.Get("skip_special_tokens") != nullptr) {
    bool skip_special_tokens = true;
    LINSERVE_RETURN_IF_ERROR(f.Bool("skip_special_tokens", &skip_special_tokens));
    out.set_skip_special_tokens(skip_special_tokens);
  }
  return ReadStop(f, out);
}

absl::Status ReadCompletionPrompt(Fields& f, v1::GenerateRequest& out) {
  const Json* prompt = f.Get("prompt");
  if (prompt == nullptr) return absl::OkStatus();  // a session may continue without one
  if (prompt->is_string()) {
    out.set_prompt(prompt->get<std::string>());
    return absl::OkStatus();
  }
  const char* const kShapes =
      "prompt must be a string, a list of token ids or a list of one string";
  if (!prompt->is_array()) return Invalid(kShapes);
  if (prompt->size() == 1 && (*prompt)[0].is_string()) {
    out.set_prompt((*prompt)[0].get<std::string>());
    return absl::OkStatus();
  }
  for (const Json& id : *prompt) {
    if (id.is_string()) return Invalid("prompt: a batch of several prompts is not supported");
    if (!id.is_number_integer()) return Invalid(kShapes);
    const int64_t value = id.get<int64_t>();
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      return Invalid(absl::StrCat("prompt holds token id ", value, ", outside the int32 range"));
    }
    out.add_prompt_tokens(static_cast<int32_t>(value));
  }
  return absl::OkStatus();
}

// A message's content: a string, or a list of text parts.
absl::StatusOr<std::string> MessageContent(const Json& message, size_t i) {
  const auto content = message.find("content");
  if (content == message.end() || content->is_null()) return std::string();
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return Invalid(absl::StrCat("messages[", i, "].content must be a string or a list of parts"));
  }
  std::string text;
  for (const Json& part : *content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") ||
        !part["text"].is_string()) {
      return Invalid(absl::StrCat("messages[", i,
                                  "].content: only parts {\"type\": \"text\", \"text\": ...} "
                                  "are supported"));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls, as the template writes calls.
absl::StatusOr<std::vector<std::string>> MessageToolCalls(const Json& message, size_t i,
                                                          const ChatTemplate& chat_template) {
  std::vector<std::string> calls;
  const auto list = message.find("tool_calls");
  if (list == message.end() || list->is_null()) return calls;
  const std::string at = absl::StrCat("messages[", i, "].tool_calls");
  if (!list->is_array()) return Invalid(at + " must be a list");
  for (size_t j = 0; j < list->size(); ++j) {
    const Json& call = (*list)[j];
    const auto function = call.is_object() ? call.find("function") : call.end();
    if (function == call.end() || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string() || !function->contains("arguments") ||
        !(*function)["arguments"].is_string()) {
      return Invalid(absl::StrCat(at, "[", j, "] must be {\"function\": {\"name\": a string, ",
                                  "\"arguments\": a string}}"));
    }
    const std::string arguments = (*function)["arguments"].get<std::string>();
    if (Json::parse(arguments, nullptr, /*allow_exceptions=*/false).is_discarded()) {
      return Invalid(absl::StrCat(at, "[", j, "].function.arguments is not JSON text"));
    }
    calls.push_back(
        ToolCallText(chat_template, (*function)["name"].get<std::string>(), arguments));
  }
  return calls;
}

// chat_template_kwargs: further variables of a Jinja template (vLLM's
// field), bounded in size and depth, and never one of the names the server
// sets or the template engine's globals.
constexpr size_t kMaxTemplateKwargsBytes = 16 << 10;
constexpr int kMaxTemplateKwargsDepth = 8;

int JsonDepth(const Json& value, int limit) {
  if (limit < 0 || !value.is_structured()) return 0;
  int deepest = 0;
  for (const Json& child : value) deepest = std::max(deepest, JsonDepth(child, limit - 1));
  return deepest + 1;
}

absl::StatusOr<Json> ReadTemplateKwargs(Fields& f) {
  const Json* kwargs = f.Get("chat_template_kwargs");
  if (kwargs == nullptr) return Json::object();
  if (!kwargs->is_object()) return Invalid("chat_template_kwargs must be an object");
  if (kwargs->dump().size() > kMaxTemplateKwargsBytes) {
    return Invalid(absl::StrCat("chat_template_kwargs is over ", kMaxTemplateKwargsBytes, " bytes"));
  }
  if (JsonDepth(*kwargs, kMaxTemplateKwargsDepth + 1) > kMaxTemplateKwargsDepth) {
    return Invalid(absl::StrCat("chat_template_kwargs nests deeper than ", kMaxTemplateKwargsDepth));
  }
  static const absl::flat_hash_set<std::string> kReserved = {
      "messages", "tools", "add_generation_prompt", "raise_exception", "namespace", "range",
      "dict", "strftime_now"};
  for (const auto& [key, value] : kwargs->items()) {
    if (kReserved.contains(key) || absl::EndsWith(key, "_token") || absl::EndsWith(key, "_tokens")) {
      return Invalid(absl::StrCat("chat_template_kwargs.", key,
                                  ": the server sets this name; a request cannot"));
    }
  }
  return *kwargs;
}

// The request's messages as a Jinja template reads them: as sent, with each
// tool call's arguments (JSON text in OpenAI's API) as the object it holds,
// which templates iterate or print with tojson.
absl::StatusOr<Json> JinjaMessages(const Json& messages) {
  Json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    Json& m = out[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Invalid(absl::StrCat("messages[", i, "].role must be a string"));
    }
    const auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string() && !content->is_array()) {
      return Invalid(absl::StrCat("messages[", i, "].content must be a string or a list of parts"));
    }
    const auto calls = m.find("tool_calls");
    if (calls == m.end() || calls->is_null()) continue;
    if (!calls->is_array()) return Invalid(absl::StrCat("messages[", i, "].tool_calls must be a list"));
    for (size_t j = 0; j < calls->size(); ++j) {
      Json& call = (*calls)[j];
      const std::string at = absl::StrCat("messages[", i, "].tool_calls[", j, "]");
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].contains("name") || !call["function"]["name"].is_string()) {
        return Invalid(at + " must be {\"function\": {\"name\": a string, \"arguments\": ...}}");
      }
      Json& arguments = call["function"]["arguments"];
      if (arguments.is_string()) {
        Json parsed = Json::parse(arguments.get<std::string>(), nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) return Invalid(at + ".function.arguments is not JSON text");
        arguments = std::move(parsed);
      }
    }
  }
  return out;
}

absl::Status ReadMessages(Fields& f, const ChatTemplate& chat_template, const OpenAiTools& tools,
                          bool in_session, const Json* session_messages, OpenAiRequest& request) {
  v1::GenerateRequest& out = request.generate;
  const Json* messages = f.Get("messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Invalid("messages must be a non-empty list");
  }
  std::string mode;
  LINSERVE_RETURN_IF_ERROR(f.String("session_messages", &mode));
  if (!mode.empty() && mode != "append" && mode != "replace") {
    return Invalid(absl::StrCat("session_messages = \"", mode,
                                "\" is not \"append\" (the default) or \"replace\""));
  }
  if (!mode.empty() && !in_session) {
    return Invalid("session_messages says how a session's turn takes its messages; send it with "
                   "session_id (or x-session-id) or session = \"new\"");
  }
  if (mode == "replace" && chat_template.jinja() == nullptr) {
    return Invalid("session_messages = \"replace\" needs the model's Jinja chat template; in "
                   "this server's built-in chat format a session's turn sends its new messages");
  }
  if (f.Get("chat_template") != nullptr) {
    return Invalid("chat_template: a request cannot bring its own chat template; the server "
                   "renders the model's");
  }
  bool add_generation_prompt = true;
  LINSERVE_RETURN_IF_ERROR(f.Bool("add_generation_prompt", &add_generation_prompt));
  LINSERVE_ASSIGN_OR_RETURN(Json kwargs, ReadTemplateKwargs(f));
  if (chat_template.jinja() != nullptr) {
    LINSERVE_ASSIGN_OR_RETURN(Json jinja_messages, JinjaMessages(*messages));
    if (in_session && mode != "replace" && session_messages != nullptr) {
      Json whole = *session_messages;
      whole.insert(whole.end(), jinja_messages.begin(), jinja_messages.end());
      jinja_messages = std::move(whole);
    }
    const Json* sent_tools = f.Get("tools");
    const Json listed = tools.active() && sent_tools != nullptr ? *sent_tools : Json();
    LINSERVE_ASSIGN_OR_RETURN(
        RenderedPrompt rendered,
        chat_template.RenderJinja(jinja_messages, listed, add_generation_prompt, kwargs));
    out.set_prompt(std::move(rendered.text));
    request.prompt_plain = std::move(rendered.plain);
    if (in_session) {
      // The messages are the session's whole conversation: it feeds what it
      // does not hold, and keeps its state where the history ends, before
      // the generation prompt, for the next turn, which the template may
      // render differently from there on (earlier reasoning dropped).
      out.set_conversation(true);
      request.chat_messages = jinja_messages;
      if (add_generation_prompt) {
        LINSERVE_ASSIGN_OR_RETURN(
            RenderedPrompt history,
            chat_template.RenderJinja(jinja_messages, listed, /*add_generation_prompt=*/false,
                                      kwargs));
        request.history_prompt = std::move(history.text);
        request.history_plain = std::move(history.plain);
      } else {
        request.history_prompt = out.prompt();
        request.history_plain = request.prompt_plain;
      }
    }
    return absl::OkStatus();
  }
  std::vector<ChatMessage> parsed;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Invalid(absl::StrCat("messages[", i, "].role must be a string"));
    }
    const std::string role = m["role"].get<std::string>();
    LINSERVE_ASSIGN_OR_RETURN(std::string content, MessageContent(m, i));
    LINSERVE_ASSIGN_OR_RETURN(std::vector<std::string> calls,
                              MessageToolCalls(m, i, chat_template));
    if (!calls.empty() && role != "assistant") {
      return Invalid(absl::StrCat("messages[", i, "].tool_calls is for assistant messages"));
    }
    if (role == "tool") {
      const auto id = m.find("tool_call_id");
      if (id == m.end() || !id->is_string()) {
        return Invalid(absl::StrCat("messages[", i, "].tool_call_id must be a string"));
      }
    }
    parsed.push_back({role, std::move(content), std::move(calls)});
  }
  // A prefix/suffix template's one switch, as Jinja templates read it.
  bool enable_thinking = false;
  if (const auto thinking = kwargs.find("enable_thinking"); thinking != kwargs.end()) {
    if (!thinking->is_boolean()) return Invalid("chat_template_kwargs.enable_thinking must be a boolean");
    enable_thinking = thinking->get<bool>();
  }
  LINSERVE_ASSIGN_OR_RETURN(
      RenderedPrompt rendered,
      chat_template.RenderWithPlain(parsed, tools.active() ? ToolListText(tools) : "",
                                    add_generation_prompt, enable_thinking));
  out.set_prompt(std::move(rendered.text));
  request.prompt_plain = std::move(rendered.plain);
  return absl::OkStatus();
}

absl::Status ReadLogprobs(OpenAiEndpoint endpoint, Fields& f, v1::GenerateRequest& out) {
  if (endpoint == OpenAiEndpoint::kCompletions) {
    // An integer: the alternatives per token (0: the sampled token only).
    return f.Integer("logprobs", 0, std::numeric_limits<int32_t>::max(), [&](int64_t v) {
      out.set_logprobs(true);
      out.set_top_logprobs(static_cast<int32_t>(v));
    });
  }
  bool logprobs = false;
  LINSERVE_RETURN_IF_ERROR(f.Bool("logprobs", &logprobs));
  out.set_logprobs(logprobs);
  return f.Integer("top_logprobs", 0, std::numeric_limits<int32_t>::max(),
                   [&](int64_t v) { out.set_top_logprobs(static_cast<int32_t>(v)); });
}

// n and best_of, read as given: their bounds (--max_n, --max_batch) are
// the server's, checked by its handler.
absl::Status ReadChoices(OpenAiEndpoint endpoint, Fields& f, OpenAiRequest& out) {
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  LINSERVE_RETURN_IF_ERROR(f.Integer("n", 1, int32_max, [&](int64_t v) { out.n = v; }));
  bool best_of_given = false;
  LINSERVE_RETURN_IF_ERROR(f.Integer("best_of", 1, int32_max, [&](int64_t v) {
    out.best_of = v;
    best_of_given = true;
  }));
  if (best_of_given && out.best_of > 1 && endpoint == OpenAiEndpoint::kChatCompletions) {
    return Invalid("best_of is for /v1/completions; a chat sends n");
  }
  if (!best_of_given) out.best_of = out.n;
  if (out.best_of < out.n) {
    return Invalid(absl::StrCat("best_of = ", out.best_of, " is less than n = ", out.n,
                                "; best_of counts the choices made, n those returned"));
  }
  return absl::OkStatus();
}

absl::Status ReadSession(Fields& f, const std::string& header_session_id, OpenAiRequest& out) {
  std::string body_id;
  LINSERVE_RETURN_IF_ERROR(f.String("session_id", &body_id));
  if (!body_id.empty() && !header_session_id.empty() && body_id != header_session_id) {
    return Invalid("session_id differs from the x-session-id header");
  }
  out.generate.set_session_id(body_id.empty() ? header_session_id : body_id);
  std::string session;
  LINSERVE_RETURN_IF_ERROR(f.String("session", &session));
  if (!session.empty() && session != "new") {
    return Invalid(absl::StrCat("session = \"", session, "\" is not \"new\""));
  }
  out.new_session = session == "new";
  if (out.new_session && !out.generate.session_id().empty()) {
    return Invalid("session = \"new\" and session_id are both set; send one");
  }
  // A named state to start from: a stateless turn's, or the new session's.
  std::string initial_state;
  LINSERVE_RETURN_IF_ERROR(f.String("initial_state", &initial_state));
  if (!initial_state.empty() && !out.generate.session_id().empty()) {
    return Invalid("initial_state and session_id (or x-session-id) are both set: a session "
                   "already has its state; send one");
  }
  if (out.new_session) {
    out.new_session_state = initial_state;
  } else {
    out.generate.set_initial_state(initial_state);
  }
  std::string salt;
  LINSERVE_RETURN_IF_ERROR(f.String("cache_salt", &salt));
  out.generate.set_cache_salt(salt);
  // Only one choice can continue a session: with n > 1 the client names it.
  const bool with_session = out.new_session || !out.generate.session_id().empty();
  bool choice_given = false;
  LINSERVE_RETURN_IF_ERROR(f.Integer("session_choice", 0, std::numeric_limits<int32_t>::max(),
                                     [&](int64_t v) {
                                       out.session_choice = static_cast<int32_t>(v);
                                       choice_given = true;
                                     }));
  if (choice_given && !with_session) {
    return Invalid("session_choice names the choice that continues a session; send it with "
                   "session_id (or x-session-id) or session = \"new\"");
  }
  if (!with_session) return absl::OkStatus();
  if (out.best_of > out.n) {
    return Invalid(absl::StrCat("best_of = ", out.best_of, " with a session: the choice that "
                                "continues it is named before the best are known; send n"));
  }
  if (out.n > 1 && !choice_given) {
    return Invalid(absl::StrCat("n = ", out.n, " with a session: only one choice can continue "
                                "it; name it with session_choice (0 to ", out.n - 1, ")"));
  }
  if (out.session_choice >= out.n) {
    return Invalid(absl::StrCat("session_choice = ", out.session_choice, " is not a choice of n = ",
                                out.n, " (0 to ", out.n - 1, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const Json& body,
                                                 const ChatTemplate& chat_template,
                                                 const std::string& header_session_id,
                                                 const GrammarLimits& grammar_limits,
                                                 const Json* session_messages) {
  if (!body.is_object()) return Invalid("the request body must be a JSON object");
  OpenAiRequest out;
  Fields f(body);
  LINSERVE_RETURN_IF_ERROR(f.String("model", &out.model));
  LINSERVE_RETURN_IF_ERROR(RefuseUnsupported(f));
  LINSERVE_RETURN_IF_ERROR(ReadChoices(endpoint, f, out));
  LINSERVE_ASSIGN_OR_RETURN(
      out.tools, ReadTools(f.Get("tools"), f.Get("tool_choice"), f.Get("parallel_tool_calls"),
                           chat_template.tool_call_format()));
  if (out.n > 1 && out.tools.active()) {
    return Invalid(absl::StrCat("n = ", out.n, " with tools is not supported; send n = 1"));
  }
  LINSERVE_RETURN_IF_ERROR(ReadSession(f, header_session_id, out));
  if (endpoint == OpenAiEndpoint::kCompletions) {
    if (out.tools.active()) return Invalid("tools need /v1/chat/completions");
    LINSERVE_RETURN_IF_ERROR(ReadCompletionPrompt(f, out.generate));
  } else {
    const bool in_session = out.new_session || !out.generate.session_id().empty();
    LINSERVE_RETURN_IF_ERROR(
        ReadMessages(f, chat_template, out.tools, in_session, session_messages, out));
    out.template_stop = chat_template.stop();
  }
  LINSERVE_RETURN_IF_ERROR(ReadSampling(f, out.generate));
  LINSERVE_RETURN_IF_ERROR(ReadLogprobs(endpoint, f, out.generate));
  LINSERVE_RETURN_IF_ERROR(ReadConstraint(f, out.generate));
  if (out.tools.active()) {
    if (out.generate.constraint_case() != v1::GenerateRequest::CONSTRAINT_NOT_SET) {
      return Invalid("tools and a response_format or structured_outputs constraint are both set; "
                     "send one");
    }
    if (out.tools.format != ToolCallFormat::kLinserve) {
      // The model calls in its own format: "auto" reads what it writes;
      // otherwise generation is held to the format.
      if (out.tools.choice != OpenAiTools::Choice::kAuto) {
        // A prompt that opened the reasoning (Qwen3.5 thinking): closed at
        // once, so that the call is the answer.
        const bool opened = PromptOpensReasoning(ReasoningFormat::kQwen3, out.generate.prompt());
        LINSERVE_ASSIGN_OR_RETURN(std::string grammar,
                                  ModelToolGrammar(out.tools, out.tools.format, grammar_limits,
                                                   opened ? "</think>\n\n" : ""));
        out.generate.set_grammar(std::move(grammar));
      }
    } else if (chat_template.jinja() == nullptr) {
      LINSERVE_ASSIGN_OR_RETURN(std::string grammar,
                                ToolGrammar(out.tools, chat_template, grammar_limits));
      out.generate.set_grammar(std::move(grammar));
    } else if (out.tools.choice != OpenAiTools::Choice::kAuto) {
      // The template lists the tools and the model calls them in its own
      // format; holding generation to that format is not done yet.
      return Invalid("tool_choice: only \"auto\" is supported with this model's Jinja chat "
                     "template");
    }
  }
  if (endpoint == OpenAiEndpoint::kChatCompletions && !out.tools.active() &&
      PromptOpensReasoning(ReasoningFormat::kQwen3, out.generate.prompt())) {
    // The template opened the reasoning (Qwen3.5 thinking): a constraint
    // holds the answer, so the reasoning is closed at once, as for a call.
    LINSERVE_RETURN_IF_ERROR(PutConstraintAfterLead(out.generate, "</think>\n\n", grammar_limits));
  }
  LINSERVE_RETURN_IF_ERROR(f.Bool("stream", &out.stream));
  if (out.stream && out.best_of > out.n) {
    return Invalid("best_of > 1 cannot be streamed: the best are known only at the end");
  }
  if (const Json* options = f.Get("stream_options"); options != nullptr) {
    if (!options->is_object()) return Invalid("stream_options must be an object");
    const auto usage = options->find("include_usage");
    if (usage != options->end() && !usage->is_null()) {
      if (!usage->is_boolean())
        return Invalid("stream_options.include_usage must be true or false");
      out.include_usage = usage->get<bool>();
    }
  }
  std::string user;  // accepted, as OpenAI's end-user id; not used
  LINSERVE_RETURN_IF_ERROR(f.String("user", &user));
  f.Unread(&out.ignored_fields, &out.ignored_field_count);
  return out;
}

std::string SessionWithStoredMessages(const Json& body, const std::string& header_session_id) {
  if (!body.is_object()) return "";
  const auto mode = body.find("session_messages");
  if (mode != body.end() && !mode->is_null() && *mode != "append") return "";
  const auto id = body.find("session_id");
  if (id != body.end() && !id->is_null()) {
    if (!id->is_string()) return "";
    if (!id->get<std::string>().empty()) return id->get<std::string>();
  }
  return header_session_id;
}

OpenAiField ToOpenAiField(OpenAiEndpoint endpoint, const std::string& message) {
  // The validation names GenerateRequest's fields; the client sent OpenAI's.
  const std::string prompt = endpoint == OpenAiEndpoint::kChatCompletions ? "messages" : "prompt";
  const std::pair<const char*, std::string> renames[] = {
      {"max_new_tokens", "max_tokens"}, {"prompt_tokens", "prompt"}, {"prompt", prompt},
      {"grammar", "structured_outputs.grammar"}, {"choice", "structured_outputs.choice"},
      {"json_schema", "response_format.json_schema"}};
  for (const auto& [proto_name, openai_name] : renames) {
    if (absl::StartsWith(message, proto_name)) {
      return {openai_name, openai_name + message.substr(std::string(proto_name).size())};
    }
  }
  // Otherwise the message starts with the field's name, as the client sent it.
  size_t end = 0;
  while (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) ||
                                  message[end] == '_' || message[end] == '.')) {
    ++end;
  }
  static const absl::flat_hash_set<std::string> kKnown = {"model",
                                                          "n",
                                                          "best_of",
                                                          "echo",
                                                          "suffix",
                                                          "tools",
                                                          "functions",
                                                          "tool_choice",
                                                          "parallel_tool_calls",
                                                          "function_call",
                                                          "response_format",
                                                          "structured_outputs",
                                                          "logit_bias",
                                                          "stop",
                                                          "temperature",
                                                          "top_p",
                                                          "min_p",
                                                          "top_k",
                                                          "repetition_penalty",
                                                          "presence_penalty",
                                                          "frequency_penalty",
                                                          "seed",
                                                          "max_tokens",
                                                          "max_completion_tokens",
                                                          "ignore_eos",
                                                          "skip_special_tokens",
                                                          "prompt",
                                                          "messages",
                                                          "logprobs",
                                                          "top_logprobs",
                                                          "stream",
                                                          "stream_options",
                                                          "stream_options.include_usage",
                                                          "user",
                                                          "session_id",
                                                          "session",
                                                          "initial_state",
                                                          "cache_salt",
                                                          "session_choice",
                                                          "session_messages",
                                                          "chat_template",
                                                          "chat_template_kwargs",
                                                          "add_generation_prompt"};
  std::string name = message.substr(0, end);
  if (name.empty() || !kKnown.contains(name)) {
    // "stop[2] is empty", "messages[0].role ...": the list's name.
    const size_t bracket = message.find('[');
    name = bracket != std::string::npos && bracket == end ? message.substr(0, bracket) : "";
    if (!kKnown.contains(name)) name.clear();
  }
  return {name, message};
}

}  // namespace linserve
