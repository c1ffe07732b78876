#ifndef LINSERVE_SERVER_HTTP_SERVER_H_
#define LINSERVE_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/auth.h"
#include "server/common/metrics.h"
#include "server/grpc/service.h"
#include "server/http/chat_template.h"
#include "server/net/http_listener.h"

namespace linserve {

class HttpHandlers;  // server/http/http_handlers.h
class HealthService;

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8080;  // 0 picks a free one
  HttpLimits limits;
  int64_t max_body_bytes = 1 << 20;  // a completion's body, on any framing
  // PUT /v1/states/{name}'s body (a state file, bigger than any JSON body):
  // --max_state_upload_bytes, as UploadNamedState's bound on gRPC.
  int64_t max_state_upload_bytes = 16 << 20;
  int max_connections = 1024;
  int io_threads = 2;
  std::vector<std::string> cors_origins;  // empty: no browser origin is allowed
  std::string served_model_name;
  // TLS as on the gRPC port (auth.h); tokens as there: empty is no auth.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  std::vector<TokenEntry> tokens;
  // Set: GET /health is served on this port too, by a listener of its own
  // that API clients cannot fill (plain HTTP, no token).
  std::string health_host;
  int health_port = -1;  // -1: no health port
};

// "host:port" (a bracketed IPv6 host too) into `host` and `port`; `flag`
// names it in the error.
absl::Status ParseListenAddress(const std::string& flag, const std::string& listen,
                                std::string& host, int& port);
absl::Status ParseHttpListen(const std::string& listen, HttpOptions& options);

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
