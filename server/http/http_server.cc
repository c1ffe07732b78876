#include "server/http/http_server.h"

#include <memory>
#include <utility>

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

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options,
                                                              LinserveService* service,
                                                              Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  HttpListenerOptions api;
  api.address = options.listen;
  api.tls_cert_file = options.tls_cert_file;
  api.tls_key_file = options.tls_key_file;
  api.tls_client_ca_file = options.tls_client_ca_file;
  api.limits = options.limits;
  api.max_connections = options.max_connections;
  api.io_threads = options.io_threads;
  api.name = "http";
  api.on_refused = [metrics] { metrics->CountRejection("http_connections"); };
  HttpListenerOptions health;
  if (options.health_listen.has_value()) health.address = *options.health_listen;
  // Probes and nothing else: a few connections, short deadlines.
  health.limits.max_header_bytes = 8 << 10;
  health.limits.head_timeout = absl::Seconds(2);
  health.limits.idle_timeout = absl::Seconds(2);
  health.max_connections = 64;
  health.io_threads = 1;
  health.name = "http-health";
  const bool with_health = options.health_listen.has_value();

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
const std::vector<ListeningSocket>& HttpServer::sockets() const { return listener_->sockets(); }

std::vector<ListeningSocket> HttpServer::health_sockets() const {
  if (health_listener_ == nullptr) return {};
  return health_listener_->sockets();
}

int HttpServer::health_port() const {
  return health_listener_ == nullptr ? 0 : health_listener_->port();
}

void HttpServer::SetServing(ChatTemplate chat_template) {
  handlers_->SetServing(std::move(chat_template));
}

void HttpServer::SetDraining() { handlers_->SetDraining(); }

}  // namespace linserve
