#ifndef LINSERVE_SERVER_HTTP_SERVER_H_
#define LINSERVE_SERVER_HTTP_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/auth.h"
#include "server/common/metrics.h"
#include "server/grpc/service.h"
#include "server/http/chat_template.h"
#include "server/net/http_listener.h"
#include "server/net/listen_address.h"

namespace prometheus {
class Registry;
}

namespace linserve {

class HttpHandlers;  // server/http/http_handlers.h
class HealthService;

struct HttpOptions {
  // --http_listen: every address it resolves to, on one port (0 picks one).
  ListenAddress listen{"http_listen", "localhost", 8080};
  HttpLimits limits;
  int64_t max_body_bytes = 1 << 20;  // a completion's body, on any framing
  // PUT /v1/states/{name}'s body (a state file, bigger than any JSON body):
  // --max_state_upload_bytes, as UploadNamedState's bound on gRPC.
  int64_t max_state_upload_bytes = 16 << 20;
  int max_connections = 1024;
  int io_threads = 2;
  std::vector<std::string> cors_origins;  // empty: no other site's page is allowed
  // The hosts the server answers its own page's calls on (http_origins.h);
  // empty: DefaultAllowedHosts(listen).
  std::vector<std::string> allowed_hosts;
  bool playground = true;  // GET / serves the playground page
  std::string served_model_name;
  // --reasoning_format: "auto" (qwen3 for a Jinja template that writes
  // </think>, else none), or a format ParseReasoningFormat names.
  std::string reasoning_format = "auto";
  // --tool_call_format: "auto" (the chat template's, ChatTemplate::
  // tool_call_format), or a format ParseToolCallFormat names.
  std::string tool_call_format = "auto";
  // TLS as on the gRPC port (auth.h); tokens as there: empty is no auth.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  std::vector<TokenEntry> tokens;
  // Set: GET /health is served here too, by a listener of its own that API
  // clients cannot fill (plain HTTP, no token).
  std::optional<ListenAddress> health_listen;
  // GET /metrics on the API port too (--metrics_on_http), behind the API's
  // tokens when there are any; null: not served there.
  std::shared_ptr<prometheus::Registry> metrics_registry;
};

// The OpenAI-compatible HTTP API beside gRPC (server/README.md lists the
// endpoints): /v1/completions, /v1/chat/completions (SSE when "stream"),
// /v1/models, /v1/states (named states), /tokenize, /detokenize, /health. A
// thin transport: a request becomes the GenerateRequest the gRPC service
// takes and goes through the same validation, stream limit and scheduler; a
// turn's output comes back through an HttpTurnSink. The connections are
// served asynchronously by an HttpListener (server/net/), with its limits.
class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpOptions options,
                                                           LinserveService* service,
                                                           Metrics* metrics);
  // Stops accepting, closes the connections (their turns are cancelled) and
  // joins the threads.
  ~HttpServer();

  int port() const;
  int health_port() const;  // 0 without one
  // Where the API and the health port listen (the health port's empty
  // without one).
  const std::vector<ListeningSocket>& sockets() const;
  std::vector<ListeningSocket> health_sockets() const;
  // Once the model is loaded: its chat template; /health says ok from now on.
  void SetServing(ChatTemplate chat_template);
  // Draining: /health says 503 (new turns are refused by the scheduler).
  void SetDraining();

 private:
  HttpServer() = default;

  std::unique_ptr<HttpHandlers> handlers_;
  std::unique_ptr<HealthService> health_service_;
  std::unique_ptr<HttpListener> listener_;
  std::unique_ptr<HttpListener> health_listener_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_SERVER_H_
