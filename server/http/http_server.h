#ifndef LINSERVE_SERVER_HTTP_SERVER_H_
#define LINSERVE_SERVER_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/auth.h"
#include "server/http/chat_template.h"
#include "server/common/metrics.h"
#include "server/grpc/service.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace linserve {

class HttpHandlers;  // server/http/http_handlers.h

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8080;                // 0 picks a free one
  int threads = 256;              // connections served at once (each stream holds one)
  int keepalive_requests = 1000;  // per connection
  int keepalive_seconds = 5;      // idle, before the server closes a connection
  int64_t max_body_bytes = 1 << 20;
  int64_t max_header_bytes = 16 << 10;
  std::vector<std::string> cors_origins;  // empty: no browser origin is allowed
  std::string served_model_name;
  // TLS as on the gRPC port (auth.h); tokens as there: empty is no auth.
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  std::vector<TokenEntry> tokens;
};

// "host:port" (a bracketed IPv6 host too) into HttpOptions' host and port.
absl::Status ParseHttpListen(const std::string& listen, HttpOptions& options);

// The OpenAI-compatible HTTP API beside gRPC (server/README.md lists the
// endpoints): /v1/completions, /v1/chat/completions (SSE when "stream"),
// /v1/models, /tokenize, /detokenize, /health. A thin transport: a request
// becomes the GenerateRequest the gRPC service takes and goes through the
// same validation, stream limit and scheduler; a turn's output comes back
// through an HttpTurnSink. cpp-httplib serves each connection on a thread of
// its pool (ordinary 8 MiB stacks: LibTorch's static TLS fits, unlike in
// civetweb's 64 KiB ones).
class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpOptions options,
                                                           LinserveService* service,
                                                           Metrics* metrics);
  // Stops accepting, ends open streams and joins the threads.
  ~HttpServer();

  int port() const { return port_; }
  // Once the model is loaded: its chat template; /health says ok from now on.
  void SetServing(ChatTemplate chat_template);
  // Draining: /health says 503 (new turns are refused by the scheduler).
  void SetDraining();

 private:
  HttpServer() = default;

  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<HttpHandlers> handlers_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_SERVER_H_
