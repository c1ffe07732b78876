// libFuzzer target: the HTTP API's request bodies. The input's first byte
// picks the endpoint (completions or chat) and the template source; the rest
// is the body as a client could send it. What parses as JSON goes through
// ParseOpenAiRequest and then the gRPC path's ValidateGenerateRequest with
// the server's default limits, as a request to the server does. A refusal
// must be INVALID_ARGUMENT naming a field the client can recognise (or
// none); an accepted request must be within every limit. The rest of the
// input also goes through ChatTemplate::Parse, as a model directory's
// chat_template.json would.

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http/chat_template.h"
#include "server/http/http_errors.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_openai_request: broken promise: %s\n", what);
  std::abort();
}

void CheckRefusal(linserve::OpenAiEndpoint endpoint, const absl::Status& status) {
  Require(status.code() == absl::StatusCode::kInvalidArgument, "a refusal is not INVALID_ARGUMENT");
  Require(!status.message().empty(), "a refusal without a message");
  const linserve::OpenAiField field =
      linserve::ToOpenAiField(endpoint, std::string(status.message()));
  Require(!field.message.empty(), "a field's message got lost");
  const linserve::HttpError error = linserve::ToHttpError(status, field.param);
  Require(error.status == 400, "INVALID_ARGUMENT is not 400");
  // The body goes on the wire whatever bytes the message quotes.
  Require(!linserve::DumpJson(error.body).empty(), "an error body did not serialise");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // as fuzz_request_validation
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto endpoint = (data[0] & 1) != 0 ? linserve::OpenAiEndpoint::kChatCompletions
                                           : linserve::OpenAiEndpoint::kCompletions;
  const linserve::ChatTemplate chat_template =
      (data[0] & 2) != 0 ? linserve::ChatTemplate::RwkvWorld() : linserve::ChatTemplate::Plain();
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string header_session = (data[0] & 4) != 0 ? std::string(32, 'a') : "";

  absl::StatusOr<linserve::ChatTemplate> parsed_template =
      linserve::ChatTemplate::Parse(body, "fuzz.json");
  if (parsed_template.ok()) {
    absl::StatusOr<std::string> text = parsed_template->Render({{"user", body}});
    Require(text.ok(), "a parsed template cannot render a user message");
  }

  const linserve::RequestJson json =
      linserve::RequestJson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  absl::StatusOr<linserve::OpenAiRequest> request =
      linserve::ParseOpenAiRequest(endpoint, json, chat_template, header_session);
  if (!request.ok()) {
    CheckRefusal(endpoint, request.status());
    return 0;
  }
  Require(!(request->new_session && !request->generate.session_id().empty()),
          "a new session and a session id at once");
  const linserve::RequestLimits limits;
  absl::StatusOr<linserve::GenerateCall> call =
      linserve::ValidateGenerateRequest(request->generate, limits);
  if (!call.ok()) {
    CheckRefusal(endpoint, call.status());
    return 0;
  }
  Require(call->prompt.size() <= static_cast<size_t>(limits.max_prompt_bytes),
          "accepted a prompt over the limit");
  Require(call->prompt_tokens.size() <= static_cast<size_t>(limits.max_prompt_bytes),
          "accepted more prompt tokens than the limit");
  for (int64_t id : call->prompt_tokens) {
    Require(id >= 0 && id < limits.sampling.vocab_size,
            "accepted a token id outside the vocabulary");
  }
  Require(call->sampling.max_new_tokens >= 1 &&
              call->sampling.max_new_tokens <= limits.sampling.max_new_tokens_cap,
          "accepted max_tokens out of range");
  return 0;
}
