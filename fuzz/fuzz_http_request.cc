// libFuzzer target: the HTTP port's parsing and routing. Each input is sent,
// as raw bytes, on a loopback connection to a real HttpListener (Boost.Beast's
// parser, the connection's limits) serving the API's real handlers (origins,
// the head's verdict, routing, errors) with no model loaded, so what needs one
// answers 503. The client then shuts its side. The server must answer with
// nothing but well-formed HTTP answers, each with a status line and a
// complete body, and close the connection: never crash, hang or write a byte
// outside an answer. Small limits put the header, header count and body
// limits within reach of short inputs.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "server/common/metrics.h"
#include "server/grpc/service.h"
#include "server/http/http_server.h"

namespace {

void Require(bool condition, const char* what, const std::string& output) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_http_request: broken promise: %s\nthe server wrote:\n%s\n", what,
               output.substr(0, 2000).c_str());
  std::abort();
}

struct Server {
  linserve::Metrics metrics;
  linserve::LinserveService service{&metrics, linserve::ServiceOptions()};
  std::unique_ptr<linserve::HttpServer> http;
};

Server& TheServer() {
  static Server* server = [] {
    auto* s = new Server();
    linserve::HttpOptions options;
    options.listen = {"http_listen", "127.0.0.1", 0};
    options.max_body_bytes = 4096;
    options.limits.max_header_bytes = 2048;
    options.limits.max_header_count = 16;
    options.limits.keepalive_requests = 8;
    options.cors_origins = {"https://ok.example"};
    options.served_model_name = "fuzz";
    auto started = linserve::HttpServer::Start(std::move(options), &s->service, &s->metrics);
    if (!started.ok()) {
      std::fprintf(stderr, "fuzz_http_request: %s\n", started.status().ToString().c_str());
      std::abort();
    }
    s->http = *std::move(started);
    return s;
  }();
  return *server;
}

// Every byte of `output` belongs to an answer with a status line, headers
// and a body framed by Content-Length, chunks or (last) the close.
void CheckAnswers(const std::string& output) {
  size_t at = 0;
  while (at < output.size()) {
    const size_t head_end = output.find("\r\n\r\n", at);
    Require(head_end != std::string::npos, "an answer without the end of its head", output);
    const std::string head = output.substr(at, head_end - at);
    Require(absl::StartsWith(head, "HTTP/1.1 ") || absl::StartsWith(head, "HTTP/1.0 "),
            "bytes that are not a status line", output);
    int status = 0;
    Require(head.size() >= 12 && absl::SimpleAtoi(head.substr(9, 3), &status) && status >= 100 &&
                status < 600,
            "a status line without a status", output);
    at = head_end + 4;
    if (status == 100) continue;
    size_t length = 0;
    bool has_length = false, chunked = false;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        has_length = absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(15)), &length);
        Require(has_length, "a Content-Length that is not a number", output);
      }
      if (absl::EqualsIgnoreCase(line, "transfer-encoding: chunked")) chunked = true;
    }
    if (has_length) {
      Require(output.size() - at >= length, "a body shorter than its Content-Length", output);
      at += length;
    } else if (chunked) {
      // The only chunked answers are streams, which need a model.
      Require(false, "a chunked answer without a model", output);
    } else {
      return;  // ended by the close
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& server = TheServer();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server.http->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) std::abort();
  // A server that neither answers nor closes fails the input.
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server refused and closed
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string output;
  char buffer[16384];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) output.append(buffer, n);
  const bool timed_out = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  // Reset rather than wait out TIME_WAIT: thousands of inputs a second.
  linger reset{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  close(fd);
  Require(!timed_out, "the connection was neither answered nor closed in 5 s", output);
  CheckAnswers(output);
  return 0;
}
