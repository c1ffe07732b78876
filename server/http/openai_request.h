#ifndef LINSERVE_SERVER_OPENAI_REQUEST_H_
#define LINSERVE_SERVER_OPENAI_REQUEST_H_

// The HTTP API's request bodies (OpenAI's /v1/completions and
// /v1/chat/completions) turned into the GenerateRequest the gRPC service
// takes, so that both transports share one validation and one path to the
// scheduler. This file only reads the JSON: bounds are checked afterwards by
// ValidateGenerateRequest (server/requests/request_validation.h).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "linserve/v1/linserve.pb.h"
#include "server/http/chat_template.h"
#include "server/http/openai_request_json.h"
#include "server/http/openai_tools.h"

namespace linserve {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };


struct OpenAiRequest {
  v1::GenerateRequest generate;  // prompt or prompt_tokens, sampling, stop, session_id, ...
  std::vector<std::string> template_stop;  // a chat template's stop strings, added after validation
  // Where a Jinja-rendered prompt holds special token texts the request sent:
  // encoded as plain text (special_text_fence.h).
  std::vector<ByteRange> prompt_plain;
  // A Jinja chat session's turn (generate.conversation): its messages
  // rendered without the generation prompt, where the session keeps its
  // state (generate.keep_state_at, set once both are encoded).
  std::string history_prompt;
  std::vector<ByteRange> history_plain;
  // A Jinja chat session's turn: every message rendered (the session's
  // stored ones first, unless the request sent its whole conversation), as
  // the template read them: what the session keeps for its next turn
  // (chat_session_messages.h).
  RequestJson chat_messages;
  std::string model;                       // as sent; empty: not sent
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool new_session = false;    // "session": "new"
  // "initial_state" with "session": "new": the named state the new session
  // starts from (the session then has it: generate.initial_state stays
  // empty). Without a new session it is generate.initial_state.
  std::string new_session_state;
  OpenAiTools tools;           // tools and tool_choice (chat only)
  // Choices: `n` returned; `best_of` made (completions only; never less
  // than n), the n with the highest cumulative logprob returned. The
  // prompt is prefilled once for all of them. With a session, n > 1 needs
  // `session_choice` (an extension): the choice that continues it.
  int32_t n = 1;
  int32_t best_of = 1;
  int32_t session_choice = 0;
  // Fields the server does not know, ignored (OpenAI clients send extras):
  // how many, and the first kListedIgnoredFields of their names, each cut
  // to kListedIgnoredFieldBytes, for the log (a body may hold thousands).
  static constexpr size_t kListedIgnoredFields = 8;
  static constexpr size_t kListedIgnoredFieldBytes = 64;
  std::vector<std::string> ignored_fields;
  size_t ignored_field_count = 0;
};

// INVALID_ARGUMENT naming the field (its OpenAI name) for a body that is not
// an object, a field of the wrong type, or a field that would change the
// result but is not supported (echo, suffix, functions), or a combination
// of choices that cannot be served (best_of < n, best_of streamed, n > 1
// with tools, n > 1 with a session and no session_choice). response_format (json_object, json_schema) and vLLM's
// structured_outputs (grammar, choice, json) become the request's
// constraint, logit_bias its logit_bias; GenerateRequest's validation
// checks them as it checks gRPC's.
// `header_session_id` is the x-session-id header ("" when absent).
// `session_messages`: a Jinja chat session's stored conversation
// (ChatSessionMessages), which the request's messages follow unless it sends
// "session_messages": "replace" (its messages are then the whole
// conversation); null: the session holds none (a new one).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, const RequestJson& body,
                                                 const ChatTemplate& chat_template,
                                                 const std::string& header_session_id,
                                                 const GrammarLimits& grammar_limits = {},
                                                 const RequestJson* session_messages = nullptr);

// The existing session whose stored messages a chat request's messages
// follow (its session_id or `header_session_id`, without "session_messages":
// "replace"); empty when there is none or the body is malformed (its parse
// then says how). Only a Jinja chat template's sessions store messages.
std::string SessionWithStoredMessages(const RequestJson& body,
                                      const std::string& header_session_id);

// The OpenAI name of the request field an INVALID_ARGUMENT message of the
// validation starts with ("max_new_tokens = 0 is outside ..." -> "max_tokens"),
// and the message with that name: the HTTP error's `param` and text.
struct OpenAiField {
  std::string param;  // empty: the message names no field
  std::string message;
};
OpenAiField ToOpenAiField(OpenAiEndpoint endpoint, const std::string& message);

}  // namespace linserve

#endif  // LINSERVE_SERVER_OPENAI_REQUEST_H_
