#ifndef LINSERVE_SERVER_CHAT_TEMPLATE_H_
#define LINSERVE_SERVER_CHAT_TEMPLATE_H_

// How chat messages become the text a model continues (the HTTP API's
// /v1/chat/completions). A message renders as its role's prefix, its
// content, its role's suffix; a request's text is its messages in order,
// then the assistant's prefix (the generation prompt). An assistant turn
// ends at the template's stop string, which is the assistant's suffix: a
// session's state consumes it where the turn stopped, so a session's next
// turn renders only the new messages, and the session holds exactly the text
// a stateless request with the whole history renders.
//
// The model directory declares its template in chat_template.json:
//   {"roles": {"system":    {"prefix": "System: ", "suffix": "\n\n"},
//              "user":      {"prefix": "User: ", "suffix": "\n\n"},
//              "assistant": {"prefix": "Assistant:", "suffix": "\n\n"}},
//    "stop": ["\n\n"]}
// Without the file an RWKV-7 model gets RWKV's World/G1 format (the example
// above) and any other model the plain one (no prefixes; every message ends
// with a blank line).
//
// A thinking model's switch (chat_template_kwargs.enable_thinking, as Jinja
// templates take it) is the file's optional "thinking":
//   "thinking": {"user_suffix": " think", "open": " <think"}
// With enable_thinking true every user message ends in user_suffix and the
// generation prompt in `open`, which opens the reasoning (RWKV-7 G1's think
// mode, the built-in RWKV format's); false or absent, neither.
//
// A model published with its own Jinja template renders through it instead
// (engine/jinja/), as Hugging Face's apply_chat_template does. The first of
// these is the model's template: --chat_template_file, the model directory's
// chat_template.jinja, tokenizer_config.json's "chat_template", then
// chat_template.json, then the built-ins above. A model may publish a second
// Jinja template named "tool_use" (additional_chat_templates/tool_use.jinja
// beside chat_template.jinja, or in tokenizer_config.json's list beside
// "default"): as transformers does, a request that sends tools renders
// through it.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/jinja/jinja_template.h"
#include "server/common/reasoning_split.h"
#include "server/http/openai_request_json.h"
#include "server/http/special_text_fence.h"
#include "server/http/tool_call_parser.h"

namespace linserve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  // An assistant's calls, each as ToolCallText writes it (after content).
  std::vector<std::string> tool_calls;
};

class ChatTemplate {
 public:
  struct Role {
    std::string prefix;
    std::string suffix;
  };
  // How the template shows tools (chat_template.json's optional "tools"):
  //   "tools": {"list": "…{tools}…", "call_start": "<tool_call>",
  //             "call_end": "</tool_call>",
  //             "result": {"prefix": "Tool: ", "suffix": "\n\n"}}
  // `list` is a system message's text with {tools} replaced by the tools'
  // JSON, one per line, rendered before a request's messages when it sends
  // tools; a call is call_start, its JSON, call_end, in an assistant turn; a
  // "tool" message (a call's result) renders with `result`.
  struct Tools {
    std::string list;
    std::string call_start;
    std::string call_end;
    Role result;
  };
  // How thinking is switched on (chat_template.json's optional "thinking").
  struct Thinking {
    std::string user_suffix;
    std::string open;
  };

  // RWKV World/G1: "User: …\n\nAssistant: …\n\n".
  static ChatTemplate RwkvWorld();
  // ChatML ("<|im_start|>user\n…<|im_end|>\n"): Qwen3.5's turns, until a model's own
  // template is rendered; no tools.
  static ChatTemplate ChatMl();
  // Texts separated by blank lines, no role names.
  static ChatTemplate Plain();
  // From chat_template.json's text; errors name the file and the field.
  static absl::StatusOr<ChatTemplate> Parse(absl::string_view json, absl::string_view source);
  // A Jinja template's text; `source` names it in errors and in source().
  // bos_token and eos_token are what the template sees under those names.
  static absl::StatusOr<ChatTemplate> FromJinja(absl::string_view text, const std::string& source,
                                                std::string bos_token, std::string eos_token);
  // The template of the model at `model_path` (a directory, or a weights
  // file whose directory is read), in the order above; `template_file`
  // (--chat_template_file, "" for none) comes first.
  static absl::StatusOr<ChatTemplate> ForModel(const std::string& model_path,
                                               const std::string& architecture,
                                               const std::string& template_file = "");

  // The text of `messages` followed by the generation prompt; with
  // `tool_list` (ToolListText) and a template that shows tools, the tools'
  // system message first. An unknown role is INVALID_ARGUMENT naming
  // messages[i].role, and so is a "tool" message where the template shows
  // no tools.
  // Without `add_generation_prompt` the text ends after the last message.
  // `enable_thinking` (where the template has `thinking`): as above.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const std::string& tool_list = "",
                                     bool add_generation_prompt = true,
                                     bool enable_thinking = false) const;
  // The same, with the ranges that hold what the request sent (the
  // contents, the tools' list) as plain ranges: a special token's text in
  // them is encoded as text.
  absl::StatusOr<RenderedPrompt> RenderWithPlain(const std::vector<ChatMessage>& messages,
                                                 const std::string& tool_list,
                                                 bool add_generation_prompt,
                                                 bool enable_thinking) const;

  // A Jinja template's rendering: `messages` as the request sent them (each
  // call's arguments as an object), `tools` (null: none; otherwise the
  // "tool_use" template renders where the model has one), the generation
  // prompt, and `kwargs` (chat_template_kwargs, already checked) as further
  // variables. A template's own error (raise_exception, a type error) is
  // INVALID_ARGUMENT, a limit crossed RESOURCE_EXHAUSTED. The special token
  // texts (set_special_texts) inside what the request sent come back as
  // plain ranges (special_text_fence.h).
  absl::StatusOr<RenderedPrompt> RenderJinja(const RequestJson& messages, const RequestJson& tools,
                                             bool add_generation_prompt,
                                             const RequestJson& kwargs) const;
  // The tokenizer's special token texts (Tokenizer::SpecialTexts), which a
  // request's messages must not produce.
  void set_special_texts(std::vector<std::string> texts) { special_texts_ = std::move(texts); }
  // Null unless the template is Jinja.
  const jinja::Template* jinja() const { return jinja_.get(); }
  // A Jinja template that writes "</think>": its model reasons Qwen3's way
  // (--reasoning_format auto).
  bool writes_think_tags() const { return writes_think_tags_; }
  // How the template writes a call (--tool_call_format auto): a Jinja
  // template's own form (the "tool_use" template's where there is one), else
  // linserve (chat_template.json's).
  ToolCallFormat tool_call_format() const { return tool_call_format_; }
  // --tool_call_format, when it names one.
  void set_tool_call_format(ToolCallFormat format) { tool_call_format_ = format; }

  // Null where the template has no thinking switch.
  const Thinking* thinking() const { return thinking_ ? &*thinking_ : nullptr; }

  // Null where the template declares no tools.
  const Tools* tools() const { return tools_ ? &*tools_ : nullptr; }

  // What ends an assistant turn in a rendered history (its suffix).
  const std::string& turn_end() const { return assistant_.suffix; }
  // Stop strings every chat turn gets besides the request's own.
  const std::vector<std::string>& stop() const { return stop_; }
  // "rwkv_world", "plain" or the file it came from.
  const std::string& source() const { return source_; }

 private:
  // The "tool_use" template beside a Jinja one; errors name `source`.
  absl::Status AddToolUseTemplate(absl::string_view text, const std::string& source);

  Role system_, user_, assistant_;
  std::optional<Tools> tools_;
  std::optional<Thinking> thinking_;
  std::vector<std::string> stop_;
  std::string source_;
  std::shared_ptr<const jinja::Template> jinja_;
  std::shared_ptr<const jinja::Template> tool_use_jinja_;  // null: none
  std::string tool_use_source_;
  std::string bos_token_, eos_token_;  // a Jinja template's special tokens
  std::vector<std::string> special_texts_;
  bool writes_think_tags_ = false;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kLinserve;
};

// --reasoning_format `flag` resolved: a format's name as given (checked by
// the flag's parser; an unknown name is none), or "auto": qwen3 for a Jinja
// template that writes </think>, rwkv_g1 for a template with a thinking
// switch (RWKV-7 G1's), none otherwise or without a template.
ReasoningFormat ResolveReasoningFormat(absl::string_view flag, const ChatTemplate* chat);

}  // namespace linserve

#endif  // LINSERVE_SERVER_CHAT_TEMPLATE_H_
