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

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace linserve {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  struct Role {
    std::string prefix;
    std::string suffix;
  };

  // RWKV World/G1: "User: …\n\nAssistant: …\n\n".
  static ChatTemplate RwkvWorld();
  // Texts separated by blank lines, no role names.
  static ChatTemplate Plain();
  // From chat_template.json's text; errors name the file and the field.
  static absl::StatusOr<ChatTemplate> Parse(absl::string_view json, absl::string_view source);
  // The template of the model at `model_path` (a directory, or a weights
  // file whose directory is read): its chat_template.json, or the default of
  // `architecture`.
  static absl::StatusOr<ChatTemplate> ForModel(const std::string& model_path,
                                               const std::string& architecture);

  // The text of `messages` followed by the generation prompt. An unknown role
  // is INVALID_ARGUMENT naming messages[i].role.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages) const;

  // What ends an assistant turn in a rendered history (its suffix).
  const std::string& turn_end() const { return assistant_.suffix; }
  // Stop strings every chat turn gets besides the request's own.
  const std::vector<std::string>& stop() const { return stop_; }
  // "rwkv_world", "plain" or the file it came from.
  const std::string& source() const { return source_; }

 private:
  Role system_, user_, assistant_;
  std::vector<std::string> stop_;
  std::string source_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_CHAT_TEMPLATE_H_
