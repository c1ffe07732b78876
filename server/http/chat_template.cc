#include "server/http/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

constexpr char kFileName[] = "chat_template.json";

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
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

absl::StatusOr<ChatTemplate> ChatTemplate::ForModel(const std::string& model_path,
                                                    const std::string& architecture) {
  std::filesystem::path dir(model_path);
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) dir = dir.parent_path();
  const std::filesystem::path file = dir / kFileName;
  if (std::filesystem::exists(file, error)) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.string()));
    return Parse(text.str(), file.string());
  }
  if (architecture == "rwkv7") return RwkvWorld();
  if (architecture == "qwen3_5") return ChatMl();
  return Plain();
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 const std::string& tool_list) const {
  std::string text;
  if (tools_ && !tool_list.empty()) {
    std::string list = tools_->list;
    list.replace(list.find("{tools}"), 7, tool_list);
    absl::StrAppend(&text, system_.prefix, list, system_.suffix);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Role* role = m.role == "system"      ? &system_
                       : m.role == "user"      ? &user_
                       : m.role == "assistant" ? &assistant_
                       : m.role == "tool" && tools_ ? &tools_->result
                                               : nullptr;
    if (role == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].role = \"", m.role, "\" is not one of system, user, assistant",
          tools_ ? ", tool" : " (this model's chat template declares no tools)"));
    }
    absl::StrAppend(&text, role->prefix, m.content);
    for (const std::string& call : m.tool_calls) text += call;
    text += role->suffix;
  }
  absl::StrAppend(&text, assistant_.prefix);
  return text;
}

}  // namespace linserve
