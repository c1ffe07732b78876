#ifndef LINSERVE_SERVER_CHAT_SESSION_MESSAGES_H_
#define LINSERVE_SERVER_CHAT_SESSION_MESSAGES_H_

// An HTTP chat session rendered by the model's Jinja template keeps its
// messages, so that a client sends only the new ones (as the session's
// built-in chat formats take them). The session holds, from its last turn,
// what that turn rendered from (SessionChat::context, written here) and the
// text it answered (SessionChat::reply). The next turn renders those, the
// answer read back into an assistant message as the client got it
// (reasoning_content, tool_calls), then its own messages.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/reasoning_split.h"
#include "server/http/openai_request_json.h"
#include "server/http/tool_call_parser.h"
#include "server/store/state_file.h"

namespace linserve {

// What a turn is rendered from, as its session keeps it.
struct ChatTurnContext {
  // The messages rendered, as the template reads them (tool call arguments
  // as objects), up to the turn's answer.
  RequestJson messages = RequestJson::array();
  // The calls the answer was read for (tool_format kLinserve: none); the
  // next turn lists its own tools.
  ToolCallFormat tool_format = ToolCallFormat::kLinserve;
  std::vector<RequestJson> functions;
  int32_t max_calls = 1;
  // The generation prompt opened the answer's reasoning.
  bool reasoning_opened = false;
};

std::string EncodeChatTurnContext(const ChatTurnContext& context);

// The session's conversation as messages: the last turn's messages and its
// answer as an assistant message, read as that turn's response read it
// (`reasoning`: the server's reasoning format). Empty for an empty chat.
// DATA_LOSS for a context this server did not write (a crafted state file).
absl::StatusOr<RequestJson> ChatSessionMessages(const SessionChat& chat,
                                                ReasoningFormat reasoning);

}  // namespace linserve

#endif  // LINSERVE_SERVER_CHAT_SESSION_MESSAGES_H_
