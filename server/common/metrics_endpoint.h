#ifndef LINSERVE_SERVER_METRICS_ENDPOINT_H_
#define LINSERVE_SERVER_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "server/net/http_listener.h"
#include "server/net/listen_address.h"

namespace linserve {

// GET /metrics's answer: the registry in Prometheus' text format (also
// served on the API port with --metrics_on_http).
HttpResponse MetricsResponse(prometheus::Registry& registry);

// Serves GET /metrics (Prometheus text format, serialised by prometheus-cpp)
// on an HttpListener of its own (server/net/): asynchronous, so a slow or
// stuck client holds one connection, not the endpoint.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose worker threads
// get a fixed 64 KiB stack, and with Debian's LibTorch loaded the static TLS
// of its dependency tree does not fit in that; pthread_create fails with
// EINVAL and the Exposer throws.
class MetricsEndpoint {
 public:
  // Listens on every address `address` stands for (port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const ListenAddress& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();

  int port() const { return listener_->port(); }
  const std::vector<ListeningSocket>& sockets() const { return listener_->sockets(); }

  class Service;

 private:
  MetricsEndpoint() = default;

  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpListener> listener_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_METRICS_ENDPOINT_H_
