#ifndef LINSERVE_SERVER_NET_HTTP_LISTENER_H_
#define LINSERVE_SERVER_NET_HTTP_LISTENER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/net/http_service.h"
#include "server/net/listen_address.h"
#include "server/net/listening_sockets.h"

namespace linserve {

// What one connection may send and how long it may take. Every field is a
// flag of the binary (server/README.md, "HTTP transport").
struct HttpLimits {
  int64_t max_header_bytes = 16 << 10;  // request line and headers (431)
  int max_header_count = 64;            // header fields (431)
  // A request's head must arrive whole within this of its first byte (of
  // the connection's start for the first request): a client that trickles
  // it (slowloris) is cut off.
  absl::Duration head_timeout = absl::Seconds(10);
  // And its body within this of the head.
  absl::Duration body_timeout = absl::Seconds(30);
  // A keep-alive connection with no request in flight is closed after this.
  absl::Duration idle_timeout = absl::Seconds(5);
  // A write (an answer, or a stream's pending chunks) must complete within
  // this, or the reader is taken to be gone.
  absl::Duration write_timeout = absl::Seconds(30);
  int keepalive_requests = 1000;  // requests on one connection, then it closes
};

struct HttpListenerOptions {
  // Where to listen: every address it resolves to, on one port (0 picks a
  // free one). Its flag names it in errors.
  ListenAddress address{"listen", "127.0.0.1", 0};
  // Empty: plain HTTP. Otherwise TLS, and with a client CA, clients must
  // present a certificate it signed (mTLS).
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  HttpLimits limits;
  // Connections open at once; one past it is closed as it is accepted.
  int max_connections = 1024;
  int io_threads = 2;  // the threads that run every connection's I/O
  std::string name = "http";  // in thread names and errors
  // Called (on an I/O thread) for each connection closed over the cap.
  std::function<void()> on_refused;
};

// An asynchronous HTTP/1.1 server on Boost.Beast over Boost.Asio: one
// socket per connection and no thread each; `io_threads` threads run all of
// them. The parser enforces the header and body limits on every framing,
// the deadlines bound how long a client may hold a connection, and the
// answers come from an HttpService. Refusals the transport makes itself
// close the connection, so unread bytes are never taken for a request.
class HttpListener {
 public:
  // Listens and serves `service` (which must outlive the listener) until
  // destroyed.
  static absl::StatusOr<std::unique_ptr<HttpListener>> Start(HttpListenerOptions options,
                                                             HttpService* service);
  // Stops accepting, closes every connection and joins the threads.
  ~HttpListener();

  int port() const;
  // Where it listens (at least one).
  const std::vector<ListeningSocket>& sockets() const;
  int64_t open_connections() const;
  int64_t refused_connections() const;  // over max_connections, since the start

  struct Impl;

 private:
  explicit HttpListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_HTTP_LISTENER_H_
