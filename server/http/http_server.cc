#include "server/http/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http/http_handlers.h"

namespace linserve {
namespace {

// The library listens with a backlog of 5 (compiled in): a burst of clients
// connecting at once would overflow it. Listening again on the bound socket
// only changes the backlog.
template <typename Base>
class WideBacklog : public Base {
 public:
  using Base::Base;
  void Widen() { ::listen(this->svr_sock_, SOMAXCONN); }
};

}  // namespace

absl::Status ParseHttpListen(const std::string& listen, HttpOptions& options) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_listen = \"", listen, "\" is not HOST:PORT with PORT in [0, 65535]"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  options.host = host.empty() ? "0.0.0.0" : host;
  options.port = port;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options,
                                                              LinserveService* service,
                                                              Metrics* metrics) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  if (options.tls_cert_file.empty()) {
    http->server_ = std::make_unique<WideBacklog<httplib::Server>>();
  } else {
    http->server_ = std::make_unique<WideBacklog<httplib::SSLServer>>(
        options.tls_cert_file.c_str(), options.tls_key_file.c_str(),
        options.tls_client_ca_file.empty() ? nullptr : options.tls_client_ca_file.c_str());
  }
  httplib::Server& server = *http->server_;
  if (!server.is_valid()) {
    return absl::InvalidArgumentError(
        "the HTTP port cannot use --tls_cert_file, --tls_key_file and --tls_client_ca_file");
  }
  const int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  server.set_keep_alive_max_count(static_cast<size_t>(options.keepalive_requests));
  server.set_keep_alive_timeout(options.keepalive_seconds);
  server.set_tcp_nodelay(true);  // one SSE event per token: no Nagle delay
  if (options.host.find(':') != std::string::npos) server.set_address_family(AF_INET6);
  const std::string host = options.host;
  const int wanted_port = options.port;
  http->handlers_ = std::make_unique<HttpHandlers>(std::move(options), service, metrics);
  http->handlers_->Register(server);
  if (wanted_port == 0) {
    http->port_ = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, wanted_port)) {
    http->port_ = wanted_port;
  }
  if (http->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --http_listen = ", host, ":", wanted_port));
  }
  if (auto* plain = dynamic_cast<WideBacklog<httplib::Server>*>(&server)) plain->Widen();
  if (auto* tls = dynamic_cast<WideBacklog<httplib::SSLServer>*>(&server)) tls->Widen();
  auto ended = std::make_shared<std::atomic<bool>>(false);
  http->thread_ = std::thread([&server, ended] {
    server.listen_after_bind();
    *ended = true;
  });
  // stop() does nothing to a server whose loop has not started yet, and the
  // loop would then never end: return only once it runs (a server whose
  // model then fails to load is destroyed within milliseconds).
  while (!server.is_running() && !*ended) absl::SleepFor(absl::Milliseconds(1));
  return http;
}

HttpServer::~HttpServer() {
  if (server_ == nullptr) return;
  handlers_->Stop();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::SetServing(ChatTemplate chat_template) {
  handlers_->SetServing(std::move(chat_template));
}

void HttpServer::SetDraining() { handlers_->SetDraining(); }

}  // namespace linserve
