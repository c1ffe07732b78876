#include "server/http/http_server.h"

#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_handlers.h"

namespace linserve {

// The health port's whole API: GET /health, as the main port answers it.
class HealthService : public HttpService {
 public:
  explicit HealthService(HttpHandlers* handlers) : handlers_(handlers) {}

  HttpHeadVerdict Judge(const HttpRequest&) override {
    return HttpHeadVerdict::NoBody("health");
  }
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    if (request.method == "GET" && request.path == "/health") {
      return exchange->Reply(handlers_->Health());
    }
    exchange->Reply(Refusal(404, absl::StrCat("no endpoint ", request.method, " ", request.path,
                                              " on the health port (only GET /health)")));
  }
  HttpResponse Refusal(int status, const std::string& message) override {
    return handlers_->Refusal(status, message);
  }

 private:
  HttpHandlers* const handlers_;
};

absl::Status ParseListenAddress(const std::string& flag, const std::string& listen,
                                std::string& host, int& port) {
  const size_t colon = listen.rfind(':');
  int parsed = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &parsed) ||
      parsed < 0 || parsed > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " = \"", listen, "\" is not HOST:PORT with PORT in [0, 65535]"));
  }
  host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  port = parsed;
  return absl::OkStatus();
}

absl::Status ParseHttpListen(const std::string& listen, HttpOptions& options) {
  return ParseListenAddress("http_listen", listen, options.host, options.port);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options,
                                                              LinserveService* service,
                                                              Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  HttpListenerOptions api;
  api.host = options.host;
  api.port = options.port;
  api.tls_cert_file = options.tls_cert_file;
  api.tls_key_file = options.tls_key_file;
  api.tls_client_ca_file = options.tls_client_ca_file;
  api.limits = options.limits;
  api.max_connections = options.max_connections;
  api.io_threads = options.io_threads;
  api.name = "http";
  api.on_refused = [metrics] { metrics->CountRejection("http_connections"); };
  HttpListenerOptions health;
  health.host = options.health_host;
  health.port = options.health_port;
  // Probes and nothing else: a few connections, short deadlines.
  health.limits.max_header_bytes = 8 << 10;
  health.limits.head_timeout = absl::Seconds(2);
  health.limits.idle_timeout = absl::Seconds(2);
  health.max_connections = 64;
  health.io_threads = 1;
  health.name = "http-health";
  const bool with_health = options.health_port >= 0;

  http->handlers_ = std::make_unique<HttpHandlers>(std::move(options), service, metrics);
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(api), http->handlers_.get());
  if (!listener.ok()) return listener.status();
  http->listener_ = *std::move(listener);
  if (with_health) {
    http->health_service_ = std::make_unique<HealthService>(http->handlers_.get());
    absl::StatusOr<std::unique_ptr<HttpListener>> health_listener =
        HttpListener::Start(std::move(health), http->health_service_.get());
    if (!health_listener.ok()) return health_listener.status();
    http->health_listener_ = *std::move(health_listener);
  }
  return http;
}

HttpServer::~HttpServer() {
  // The listeners first: their connections use the handlers.
  health_listener_.reset();
  listener_.reset();
}

int HttpServer::port() const { return listener_->port(); }
int HttpServer::health_port() const {
  return health_listener_ == nullptr ? 0 : health_listener_->port();
}

void HttpServer::SetServing(ChatTemplate chat_template) {
  handlers_->SetServing(std::move(chat_template));
}

void HttpServer::SetDraining() { handlers_->SetDraining(); }

}  // namespace linserve
