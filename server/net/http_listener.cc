#include "server/net/http_listener.h"

#include <pthread.h>

#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "server/net/http_connection.h"
#include "server/net/listening_sockets.h"

namespace linserve {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

struct HttpListener::Impl {
  std::shared_ptr<HttpListenerShared> shared;
  std::unique_ptr<asio::ssl::context> tls;
  // One per address the listen flag stands for (localhost: 127.0.0.1 and ::1).
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<ListeningSocket> sockets;  // what they listen on (fds owned by the acceptors)
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  int max_connections = 0;
  std::function<void()> on_refused;

  void Accept(tcp::acceptor* acceptor) {
    auto strand = asio::make_strand(shared->io);
    acceptor->async_accept(strand, [this, acceptor, strand](ErrorCode error, tcp::socket socket) {
      if (error == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!error) {
        if (shared->open.fetch_add(1) >= max_connections) {
          // Over the cap: closed at once, before a byte is read. Counted
          // before the close, so a client that sees the close sees the count.
          shared->open.fetch_sub(1);
          shared->refused.fetch_add(1);
          if (on_refused) on_refused();
          ErrorCode ignored;
          socket.close(ignored);
        } else {
          ServeHttpConnection(shared, std::move(socket), strand, tls.get());
        }
      }
      Accept(acceptor);  // an error (out of descriptors) loses one connection, not the listener
    });
  }
};

namespace {

absl::StatusOr<std::unique_ptr<asio::ssl::context>> TlsContext(const HttpListenerOptions& o) {
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ErrorCode error;
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       error);
  if (!error) context->use_certificate_chain_file(o.tls_cert_file, error);
  if (!error) context->use_private_key_file(o.tls_key_file, asio::ssl::context::pem, error);
  if (!error && !o.tls_client_ca_file.empty()) {
    context->load_verify_file(o.tls_client_ca_file, error);
    if (!error) {
      context->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert,
                               error);
    }
  }
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", o.name, " port cannot use --tls_cert_file, --tls_key_file and --tls_client_ca_file: ",
        error.message()));
  }
  return context;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpListener>> HttpListener::Start(HttpListenerOptions options,
                                                                  HttpService* service) {
  auto impl = std::make_unique<Impl>();
  impl->shared = std::make_shared<HttpListenerShared>(service, options.limits, options.name);
  impl->max_connections = options.max_connections;
  impl->on_refused = options.on_refused;
  if (!options.tls_cert_file.empty()) {
    absl::StatusOr<std::unique_ptr<asio::ssl::context>> tls = TlsContext(options);
    if (!tls.ok()) return tls.status();
    impl->tls = *std::move(tls);
  }
  absl::StatusOr<std::vector<ListeningSocket>> sockets = OpenListeningSockets(options.address);
  if (!sockets.ok()) return sockets.status();
  impl->sockets = *std::move(sockets);
  for (ListeningSocket& socket : impl->sockets) {
    auto acceptor = std::make_unique<tcp::acceptor>(impl->shared->io);
    ErrorCode error;
    acceptor->assign(socket.v6 ? tcp::v6() : tcp::v4(), socket.fd, error);
    if (error) {
      CloseListeningSockets(impl->sockets);  // those not yet assigned; the rest close with theirs
      return absl::InternalError(absl::StrCat("--", options.address.flag, ": ", error.message()));
    }
    socket.fd = -1;  // the acceptor's now
    impl->acceptors.push_back(std::move(acceptor));
  }
  impl->work = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
      impl->shared->io.get_executor());
  for (auto& acceptor : impl->acceptors) impl->Accept(acceptor.get());
  for (int i = 0; i < std::max(1, options.io_threads); ++i) {
    impl->threads.emplace_back([shared = impl->shared.get(), name = options.name] {
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      shared->io.run();
    });
  }
  return std::unique_ptr<HttpListener>(new HttpListener(std::move(impl)));
}

HttpListener::HttpListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpListener::~HttpListener() {
  for (auto& acceptor : impl_->acceptors) {
    asio::post(acceptor->get_executor(), [acceptor = acceptor.get()] {
      ErrorCode ignored;
      acceptor->close(ignored);
    });
  }
  impl_->shared->CloseAll();
  impl_->work.reset();
  for (std::thread& thread : impl_->threads) thread.join();
  // Work posted after the threads ran out would never run: from now on it
  // is dropped, and what was queued runs here (every socket is closed, so
  // it only lets go of its connection).
  impl_->shared->MarkStopped();
  impl_->shared->io.restart();
  impl_->shared->io.run();
}

int HttpListener::port() const { return impl_->sockets.front().port; }
const std::vector<ListeningSocket>& HttpListener::sockets() const { return impl_->sockets; }
int64_t HttpListener::open_connections() const { return impl_->shared->open.load(); }
int64_t HttpListener::refused_connections() const { return impl_->shared->refused.load(); }

}  // namespace linserve
