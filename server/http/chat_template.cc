#include "server/http/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {
namespace {

constexpr char kFileName[] = "chat_template.json";
constexpr char kJinjaFileName[] = "chat_template.jinja";
// Where transformers saves a tokenizer's further named templates, one
// <name>.jinja each.
constexpr char kMoreJinjaDirName[] = "additional_chat_templates";
constexpr char kToolUseName[] = "tool_use";
constexpr char kTokenizerConfigName[] = "tokenizer_config.json";

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

absl::StatusOr<std::string> ReadText(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
  return text.str();
}

// tokenizer_config.json's special token: a string, or {"content": ...}.
std::string SpecialToken(const nlohmann::json& config, const char* name) {
  const auto it = config.find(name);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::RwkvWorld() {
  ChatTemplate t;
  t.system_ = {"System: ", "\n\n"};
  t.user_ = {"User: ", "\n\n"};
  t.assistant_ = {"Assistant:", "\n\n"};
  t.stop_ = {"\n\n"};
  t.tools_ = Tools{
      "You can call these functions, each given with a JSON schema of its arguments:\n"
      "{tools}\n"
      "To call one, answer with <tool_call>{\"name\": the function's name, \"arguments\": "
      "its arguments}</tool_call> and nothing else.",
      "<tool_call>", "</tool_call>", Role{"Tool: ", "\n\n"}};
  // G1's think mode: "User: … think\n\nAssistant: <think".
  t.thinking_ = Thinking{" think", " <think"};
  t.source_ = "rwkv_world";
  return t;
}

ChatTemplate ChatTemplate::ChatMl() {
  ChatTemplate t;
  t.system_ = {"<|im_start|>system\n", "<|im_end|>\n"};
  t.user_ = {"<|im_start|>user\n", "<|im_end|>\n"};
  t.assistant_ = {"<|im_start|>assistant\n", "<|im_end|>\n"};
  t.stop_ = {"<|im_end|>"};
  t.source_ = "chatml";
  return t;
}

ChatTemplate ChatTemplate::Plain() {
  ChatTemplate t;
  t.system_ = t.user_ = t.assistant_ = {"", "\n\n"};
  t.stop_ = {"\n\n"};
  t.source_ = "plain";
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(absl::string_view json, absl::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr,
                                                   /*allow_exceptions=*/false);
  if (!doc.is_object()) return Bad(source, "is not a JSON object");
  ChatTemplate t;
  t.source_ = std::string(source);
  const auto roles = doc.find("roles");
  if (roles == doc.end() || !roles->is_object()) return Bad(source, "roles must be an object");
  for (auto [name, role] : {std::pair<const char*, Role*>{"system", &t.system_},
                            {"user", &t.user_},
                            {"assistant", &t.assistant_}}) {
    const auto entry = roles->find(name);
    if (entry == roles->end() || !entry->is_object()) {
      return Bad(source, absl::StrCat("roles.", name, " must be an object"));
    }
    for (auto [field, out] : {std::pair<const char*, std::string*>{"prefix", &role->prefix},
                              {"suffix", &role->suffix}}) {
      const auto value = entry->find(field);
      if (value == entry->end()) continue;  // empty
      if (!value->is_string()) {
        return Bad(source, absl::StrCat("roles.", name, ".", field, " must be a string"));
      }
      *out = value->get<std::string>();
    }
  }
  if (const auto tools = doc.find("tools"); tools != doc.end()) {
    if (!tools->is_object()) return Bad(source, "tools must be an object");
    Tools parsed;
    for (auto [field, out] : {std::pair<const char*, std::string*>{"list", &parsed.list},
                              {"call_start", &parsed.call_start},
                              {"call_end", &parsed.call_end}}) {
      const auto value = tools->find(field);
      if (value == tools->end() || !value->is_string() || value->get<std::string>().empty()) {
        return Bad(source, absl::StrCat("tools.", field, " must be a non-empty string"));
      }
      *out = value->get<std::string>();
    }
    if (parsed.list.find("{tools}") == std::string::npos) {
      return Bad(source, "tools.list must say where the tools go: {tools}");
    }
    const auto result = tools->find("result");
    if (result == tools->end() || !result->is_object()) {
      return Bad(source, "tools.result must be an object");
    }
    for (auto [field, out] : {std::pair<const char*, std::string*>{"prefix", &parsed.result.prefix},
                              {"suffix", &parsed.result.suffix}}) {
      const auto value = result->find(field);
      if (value == result->end()) continue;
      if (!value->is_string()) {
        return Bad(source, absl::StrCat("tools.result.", field, " must be a string"));
      }
      *out = value->get<std::string>();
    }
    t.tools_ = std::move(parsed);
  }
  if (const auto thinking = doc.find("thinking"); thinking != doc.end()) {
    if (!thinking->is_object()) return Bad(source, "thinking must be an object");
    Thinking parsed;
    for (auto [field, out] :
         {std::pair<const char*, std::string*>{"user_suffix", &parsed.user_suffix},
          {"open", &parsed.open}}) {
      const auto value = thinking->find(field);
      if (value == thinking->end()) continue;  // empty
      if (!value->is_string()) {
        return Bad(source, absl::StrCat("thinking.", field, " must be a string"));
      }
      *out = value->get<std::string>();
    }
    t.thinking_ = std::move(parsed);
  }
  const auto stop = doc.find("stop");
  if (stop != doc.end()) {
    if (!stop->is_array()) return Bad(source, "stop must be a list of strings");
    for (const nlohmann::json& s : *stop) {
      if (!s.is_string() || s.get<std::string>().empty()) {
        return Bad(source, "stop must be a list of non-empty strings");
      }
      t.stop_.push_back(s.get<std::string>());
    }
  }
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromJinja(absl::string_view text,
                                                     const std::string& source,
                                                     std::string bos_token, std::string eos_token) {
  absl::StatusOr<jinja::Template> parsed =
      jinja::Template::Parse(std::string_view(text.data(), text.size()));
  if (!parsed.ok()) return Bad(source, parsed.status().message());
  ChatTemplate t;
  t.jinja_ = std::make_shared<const jinja::Template>(*std::move(parsed));
  t.writes_think_tags_ = text.find("</think>") != absl::string_view::npos;
  t.tool_call_format_ = DetectToolCallFormat(std::string_view(text.data(), text.size()));
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  t.source_ = source;
  return t;
}

absl::Status ChatTemplate::AddToolUseTemplate(absl::string_view text, const std::string& source) {
  absl::StatusOr<jinja::Template> parsed =
      jinja::Template::Parse(std::string_view(text.data(), text.size()));
  if (!parsed.ok()) return Bad(source, parsed.status().message());
  tool_use_jinja_ = std::make_shared<const jinja::Template>(*std::move(parsed));
  tool_use_source_ = source;
  writes_think_tags_ = writes_think_tags_ || text.find("</think>") != absl::string_view::npos;
  // Calls are made where tools were sent, so in this template's form.
  tool_call_format_ = DetectToolCallFormat(std::string_view(text.data(), text.size()));
  return absl::OkStatus();
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForModel(const std::string& model_path,
                                                    const std::string& architecture,
                                                    const std::string& template_file) {
  std::filesystem::path dir(model_path);
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) dir = dir.parent_path();
  // The special tokens the template sees, and perhaps the template itself.
  nlohmann::json tokenizer_config = nlohmann::json::object();
  const std::filesystem::path config_file = dir / kTokenizerConfigName;
  if (std::filesystem::exists(config_file, error)) {
    absl::StatusOr<std::string> text = ReadText(config_file);
    if (!text.ok()) return text.status();
    tokenizer_config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!tokenizer_config.is_object()) return Bad(config_file.string(), "is not a JSON object");
  }
  const std::string bos = SpecialToken(tokenizer_config, "bos_token");
  const std::string eos = SpecialToken(tokenizer_config, "eos_token");
  for (const std::filesystem::path& file :
       {template_file.empty() ? std::filesystem::path() : std::filesystem::path(template_file),
        dir / kJinjaFileName}) {
    if (file.empty()) continue;
    if (file.string() == template_file || std::filesystem::exists(file, error)) {
      absl::StatusOr<std::string> text = ReadText(file);
      if (!text.ok()) return text.status();
      LINSERVE_ASSIGN_OR_RETURN(ChatTemplate t, FromJinja(*text, file.string(), bos, eos));
      const std::filesystem::path tool_use =
          dir / kMoreJinjaDirName / (std::string(kToolUseName) + ".jinja");
      if (file.string() != template_file && std::filesystem::exists(tool_use, error)) {
        LINSERVE_ASSIGN_OR_RETURN(std::string tool_use_text, ReadText(tool_use));
        LINSERVE_RETURN_IF_ERROR(t.AddToolUseTemplate(tool_use_text, tool_use.string()));
      }
      return t;
    }
  }
  if (const auto it = tokenizer_config.find("chat_template"); it != tokenizer_config.end()) {
    const std::string source = config_file.string() + " chat_template";
    if (it->is_string()) return FromJinja(it->get<std::string>(), source, bos, eos);
    // A list of named templates: the one named "default", and "tool_use"
    // where there is one.
    if (it->is_array()) {
      auto named_text = [&](const char* name) -> const nlohmann::json* {
        for (const nlohmann::json& named : *it) {
          if (named.is_object() && named.value("name", "") == name && named.contains("template") &&
              named["template"].is_string()) {
            return &named["template"];
          }
        }
        return nullptr;
      };
      if (const nlohmann::json* text = named_text("default"); text != nullptr) {
        LINSERVE_ASSIGN_OR_RETURN(
            ChatTemplate t, FromJinja(text->get<std::string>(), source + " \"default\"", bos, eos));
        if (const nlohmann::json* tool_use = named_text(kToolUseName); tool_use != nullptr) {
          LINSERVE_RETURN_IF_ERROR(
              t.AddToolUseTemplate(tool_use->get<std::string>(), source + " \"tool_use\""));
        }
        return t;
      }
    }
    return Bad(source, "is neither a template nor a list holding one named \"default\"");
  }
  const std::filesystem::path file = dir / kFileName;
  if (std::filesystem::exists(file, error)) {
    absl::StatusOr<std::string> text = ReadText(file);
    if (!text.ok()) return text.status();
    return Parse(*text, file.string());
  }
  if (architecture == "rwkv7") return RwkvWorld();
  if (architecture == "qwen3_5") return ChatMl();
  return Plain();
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderJinja(const RequestJson& messages,
                                                         const RequestJson& tools,
                                                         bool add_generation_prompt,
                                                         const RequestJson& kwargs) const {
  if (jinja_ == nullptr) return absl::InternalError("not a Jinja chat template");
  const SpecialTextFence fence(special_texts_);
  RequestJson context = RequestJson::object();
  // The request's kwargs first, so the names below always win (the request
  // checks that kwargs holds none of them).
  if (kwargs.is_object()) {
    for (const auto& [key, value] : kwargs.items()) context[key] = fence.Fence(value);
  }
  context["messages"] = fence.Fence(messages);
  if (!tools.is_null()) context["tools"] = fence.Fence(tools);
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token_;
  context["eos_token"] = eos_token_;
  // transformers renders through "tool_use" whenever tools are passed.
  const bool tool_use = !tools.is_null() && tool_use_jinja_ != nullptr;
  absl::StatusOr<std::string> text = (tool_use ? *tool_use_jinja_ : *jinja_).Render(context);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("the chat template (", tool_use ? tool_use_source_ : source_,
                                     "): ", text.status().message()));
  }
  return fence.Lift(*std::move(text));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const std::string& tool_list,
                                                 bool add_generation_prompt,
                                                 bool enable_thinking) const {
  LINSERVE_ASSIGN_OR_RETURN(
      RenderedPrompt rendered,
      RenderWithPlain(messages, tool_list, add_generation_prompt, enable_thinking));
  return std::move(rendered.text);
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderWithPlain(
    const std::vector<ChatMessage>& messages, const std::string& tool_list,
    bool add_generation_prompt, bool enable_thinking) const {
  const Thinking* thinking = enable_thinking && thinking_ ? &*thinking_ : nullptr;
  RenderedPrompt out;
  std::string& text = out.text;
  // What the request sent (the tools' list, the contents) is plain text: a
  // special token's text in it stays text (special_text_fence.h says why).
  const auto append_plain = [&out](const std::string& piece) {
    const size_t begin = out.text.size();
    out.text += piece;
    if (!piece.empty()) out.plain.push_back({begin, out.text.size()});
  };
  if (tools_ && !tool_list.empty()) {
    const size_t at = tools_->list.find("{tools}");
    absl::StrAppend(&text, system_.prefix, tools_->list.substr(0, at));
    append_plain(tool_list);
    absl::StrAppend(&text, tools_->list.substr(at + 7), system_.suffix);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Role* role = m.role == "system"           ? &system_
                       : m.role == "user"           ? &user_
                       : m.role == "assistant"      ? &assistant_
                       : m.role == "tool" && tools_ ? &tools_->result
                                                    : nullptr;
    if (role == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].role = \"", m.role, "\" is not one of system, user, assistant",
          tools_ ? ", tool" : " (this model's chat template declares no tools)"));
    }
    text += role->prefix;
    append_plain(m.content);
    if (thinking != nullptr && role == &user_) text += thinking->user_suffix;
    for (const std::string& call : m.tool_calls) text += call;
    text += role->suffix;
  }
  if (add_generation_prompt) {
    absl::StrAppend(&text, assistant_.prefix, thinking != nullptr ? thinking->open : "");
  }
  return out;
}

ReasoningFormat ResolveReasoningFormat(absl::string_view flag, const ChatTemplate* chat) {
  if (flag == "auto") {
    if (chat != nullptr && chat->writes_think_tags()) return ReasoningFormat::kQwen3;
    if (chat != nullptr && chat->thinking() != nullptr) return ReasoningFormat::kRwkvG1;
    return ReasoningFormat::kNone;
  }
  absl::StatusOr<ReasoningFormat> named =
      ParseReasoningFormat(std::string_view(flag.data(), flag.size()));
  return named.ok() ? *named : ReasoningFormat::kNone;
}

}  // namespace linserve
