#ifndef LINSERVE_SERVER_HTTP_HANDLERS_H_
#define LINSERVE_SERVER_HTTP_HANDLERS_H_

// The HTTP API's handlers (server/http/http_server.h serves them). Each runs on
// a connection thread of cpp-httplib's pool and may block it: a completion
// waits for its turn's output there.

#include <httplib.h>

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/http/chat_template.h"
#include "server/http/chat_turn_ends.h"
#include "server/http/http_errors.h"
#include "server/http/http_server.h"
#include "server/common/metrics.h"
#include "server/http/openai_request.h"
#include "server/grpc/service.h"

namespace linserve {

class HttpHandlers {
 public:
  HttpHandlers(HttpOptions options, LinserveService* service, Metrics* metrics);

  void Register(httplib::Server& server);
  void SetServing(ChatTemplate chat_template);
  void SetDraining() { draining_ = true; }
  // Ends the waits of open requests (the server is going away).
  void Stop() { stopping_ = true; }

 private:
  // Before routing: the header limit, CORS and browser origins.
  httplib::Server::HandlerResponse PreRoute(const httplib::Request& req, httplib::Response& res);
  // Gives an error status without a body (413 from the library, an
  // unknown path) OpenAI's error body.
  void FillErrorBody(const httplib::Request& req, httplib::Response& res);

  void Health(const httplib::Request& req, httplib::Response& res);
  void Models(const httplib::Request& req, httplib::Response& res);
  void Tokenize(const httplib::Request& req, httplib::Response& res);
  void Detokenize(const httplib::Request& req, httplib::Response& res);
  void Complete(OpenAiEndpoint endpoint, const httplib::Request& req, httplib::Response& res);

  // The caller's tenant ("" without auth), or the error to answer.
  absl::StatusOr<std::string> Authenticate(const httplib::Request& req) const;
  // The scheduler once the model is loaded, or UNAVAILABLE.
  absl::StatusOr<Scheduler*> Ready() const;
  absl::StatusOr<nlohmann::json> ParseBody(const httplib::Request& req) const;
  // For an endpoint that only reads: authenticated, the model loaded and,
  // when `body` is set, the body parsed into it.
  absl::StatusOr<Scheduler*> Admit(const httplib::Request& req, nlohmann::json* body) const;
  std::optional<ChatTemplate> chat_template() const;

  void Reply(httplib::Response& res, const char* method, const HttpError& error);
  void ReplyJson(httplib::Response& res, const char* method, const nlohmann::json& body);
  void Count(const char* method, int http_status);

  const HttpOptions options_;
  LinserveService* const service_;
  Metrics* const metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  std::optional<ChatTemplate> chat_template_ ABSL_GUARDED_BY(mu_);
  ChatTurnEnds chat_turn_ends_{1 << 16};

  friend class CompletionCall;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_HANDLERS_H_
