#ifndef LINSERVE_SERVER_HTTP_HANDLERS_H_
#define LINSERVE_SERVER_HTTP_HANDLERS_H_

// The HTTP API's handlers: the HttpService an HttpListener serves
// (server/http/http_server.h starts it). They run on the listener's I/O
// threads and never wait there: a completion answers when its turn's events
// reach the connection's strand.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/common/metrics.h"
#include "server/grpc/service.h"
#include "server/http/chat_template.h"
#include "server/common/reasoning_split.h"
#include "server/http/chat_turn_ends.h"
#include "server/http/http_errors.h"
#include "server/http/http_origins.h"
#include "server/http/playground_assets.h"
#include "server/http/openai_request.h"
#include "server/http/http_server.h"
#include "server/http/openai_request.h"
#include "server/net/http_service.h"

namespace linserve {

// A 404's message: the unknown route and the routes there are (an API user
// has the server, not its sources).
std::string UnknownEndpointMessage(absl::string_view method, absl::string_view path);

class HttpHandlers : public HttpService {
 public:
  HttpHandlers(HttpOptions options, LinserveService* service, Metrics* metrics);

  // HttpService.
  HttpHeadVerdict Judge(const HttpRequest& head) override;
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override;
  HttpResponse Refusal(int status, const std::string& message) override;

  void SetServing(ChatTemplate chat_template);
  void SetDraining() { draining_ = true; }
  // GET /health's answer (the health port serves it too).
  HttpResponse Health();

 private:
  // Before routing: browser origins and CORS. Set: the answer (a refused
  // origin, a preflight); `cors` gets the headers every answer carries.
  std::optional<HttpResponse> CheckOrigin(const HttpRequest& req, HttpHeaders& cors);

  // GET /v1/models (the list), or GET /v1/models/{id} (`id`: the one model).
  HttpResponse Models(const HttpRequest& req, std::optional<std::string> id);
  HttpResponse MetricsText(const HttpRequest& req);  // GET /metrics, --metrics_on_http
  // The playground's file at `path` (GET /, /playground.js, /playground.css),
  // or nullptr; and its answer, with the policy that confines the page.
  static const PlaygroundAsset* PlaygroundFile(const std::string& path);
  HttpResponse Playground(const PlaygroundAsset& asset);
  HttpResponse Tokenize(const HttpRequest& req);
  HttpResponse Detokenize(const HttpRequest& req);
  void Complete(OpenAiEndpoint endpoint, HttpRequest req, HttpHeaders cors,
                std::shared_ptr<HttpExchange> exchange);

  // /v1/states and /v1/states/{name} (http_named_states.cc).
  using StateAnswer =
      std::function<void(const absl::StatusOr<nlohmann::json>& body, const std::string& param)>;
  void NamedStates(HttpRequest req, HttpHeaders cors, std::shared_ptr<HttpExchange> exchange);
  void CreateNamedState(const HttpRequest& req, const std::string& tenant, Scheduler* scheduler,
                        const StateAnswer& answer, Scheduler::Done<NamedStateInfo> done);
  // PUT /v1/states/{name}: its body is a state file, up to
  // --max_state_upload_bytes; JudgeStateUpload refuses it from the head
  // (no token, a Content-Type other than application/octet-stream).
  static bool IsStateUpload(const HttpRequest& head);
  std::optional<HttpResponse> JudgeStateUpload(const HttpRequest& head);
  // What both state-file bodies' heads must show: a caller the tokens admit
  // (else its error, counted under `method`) and application/octet-stream
  // (else 415 naming `route`).
  std::optional<HttpResponse> JudgeStateFileBody(const HttpRequest& head, const char* method,
                                                 absl::string_view route);

  // /v1/sessions and below (http_sessions.cc).
  void Sessions(HttpRequest req, HttpHeaders cors, std::shared_ptr<HttpExchange> exchange);
  void CreateSessionFromBody(const HttpRequest& req, const std::string& tenant,
                             Scheduler* scheduler, const StateAnswer& answer,
                             Scheduler::Done<SessionInfo> done);
  // POST /v1/sessions/import: its body is a state file, up to
  // --max_state_bytes; JudgeSessionImport refuses it from the head (no
  // token, a Content-Type other than application/octet-stream).
  static bool IsSessionImport(const HttpRequest& head);
  std::optional<HttpResponse> JudgeSessionImport(const HttpRequest& head);

  // The caller's tenant ("" without auth), or the error to answer.
  absl::StatusOr<std::string> Authenticate(const HttpRequest& req) const;
  // The scheduler once the model is loaded, or UNAVAILABLE.
  absl::StatusOr<Scheduler*> Ready() const;
  absl::StatusOr<RequestJson> ParseBody(const HttpRequest& req) const;
  // For an endpoint that only reads: authenticated, the model loaded and,
  // when `body` is set, the body parsed into it.
  absl::StatusOr<Scheduler*> Admit(const HttpRequest& req, RequestJson* body) const;
  std::optional<ChatTemplate> chat_template() const;
  // --reasoning_format, "auto" resolved against the chat template served.
  ReasoningFormat reasoning_format() const;
  // --tool_call_format, "auto" resolved against the chat template served.
  ToolCallFormat tool_call_format() const;

  HttpResponse ErrorAnswer(const char* method, const HttpError& error);
  HttpResponse JsonAnswer(const char* method, const nlohmann::json& body);
  void Count(const char* method, int http_status);

  const HttpOptions options_;
  LinserveService* const service_;
  Metrics* const metrics_;
  int64_t max_state_bytes_;  // a session import's body (--max_state_bytes)
  const OriginPolicy origin_policy_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex mu_;
  std::optional<ChatTemplate> chat_template_ ABSL_GUARDED_BY(mu_);
  ChatTurnEnds chat_turn_ends_{1 << 16};

  friend class CompletionCall;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_HANDLERS_H_
