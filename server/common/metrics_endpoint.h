#ifndef LINSERVE_SERVER_METRICS_ENDPOINT_H_
#define LINSERVE_SERVER_METRICS_ENDPOINT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace linserve {

// Serves GET /metrics (Prometheus text format, serialised by prometheus-cpp)
// over plain HTTP/1.1 on one thread, one connection at a time.
//
// Why not prometheus-cpp's Exposer: it runs civetweb, whose worker threads
// get a fixed 64 KiB stack, and with Debian's LibTorch loaded the static TLS
// of its dependency tree does not fit in that; pthread_create fails with
// EINVAL and the Exposer throws. A scrape is one small request every few
// seconds, which one thread with ordinary stacks serves fine.
class MetricsEndpoint {
 public:
  // Listens on `host:port` (port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();

  int port() const { return port_; }

 private:
  MetricsEndpoint(int listen_fd, int port, std::shared_ptr<prometheus::Registry> registry);
  void Serve();
  void Answer(int fd);

  const int listen_fd_;
  const int port_;
  const std::shared_ptr<prometheus::Registry> registry_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_METRICS_ENDPOINT_H_
