#include "server/common/metrics_endpoint.h"

#include <sstream>
#include <utility>

#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace linserve {

HttpResponse MetricsResponse(prometheus::Registry& registry) {
  std::ostringstream body;
  prometheus::TextSerializer().Serialize(body, registry.Collect());
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = body.str();
  return response;
}

class MetricsEndpoint::Service : public HttpService {
 public:
  explicit Service(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  HttpHeadVerdict Judge(const HttpRequest&) override {
    return HttpHeadVerdict::NoBody("metrics");
  }
  void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) override {
    if (request.method != "GET" || request.path != "/metrics") {
      return exchange->Reply(Refusal(404, "only GET /metrics is served"));
    }
    exchange->Reply(MetricsResponse(*registry_));
  }
  HttpResponse Refusal(int status, const std::string& message) override {
    HttpResponse response;
    response.status = status;
    response.content_type = "text/plain";
    response.body = absl::StrCat(message, "\n");
    return response;
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const ListenAddress& address, std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->service_ = std::make_unique<Service>(std::move(registry));
  HttpListenerOptions options;
  options.address = address;
  // Scrapes and nothing else: small requests, a few connections.
  options.limits.max_header_bytes = 8 << 10;
  options.limits.head_timeout = absl::Seconds(5);
  options.max_connections = 64;
  options.io_threads = 1;
  options.name = "metrics";
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(options), endpoint->service_.get());
  if (!listener.ok()) return listener.status();
  endpoint->listener_ = *std::move(listener);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() { listener_.reset(); }

}  // namespace linserve
