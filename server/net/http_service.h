#ifndef LINSERVE_SERVER_NET_HTTP_SERVICE_H_
#define LINSERVE_SERVER_NET_HTTP_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/net/http_exchange.h"
#include "server/net/http_message.h"

namespace linserve {

// What a request's head decides before its body is read.
struct HttpHeadVerdict {
  // The most body bytes this request may carry, on any framing.
  int64_t max_body_bytes = 0;
  std::string body_limit_name;  // the flag that sets it, for the 413's message
  // Set: the answer, given without reading the body; the connection then
  // closes, so no byte of that body is parsed as a request.
  std::optional<HttpResponse> refusal;

  // For a port that takes no request body (health, metrics): any body is
  // 413, `port` naming the port in the message.
  static HttpHeadVerdict NoBody(const std::string& port) {
    HttpHeadVerdict verdict;
    verdict.body_limit_name = "the " + port + " port's limit";
    return verdict;
  }
};

// What an HttpListener serves: the application behind the transport.
class HttpService {
 public:
  virtual ~HttpService() = default;

  // Judges a request from its head (`head.body` is empty).
  virtual HttpHeadVerdict Judge(const HttpRequest& head) = 0;
  // Answers a whole request through `exchange`.
  virtual void Handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) = 0;
  // The answer for a refusal the transport makes itself (431, 413, 400,
  // 411, 501), with `message` naming the limit or the fault.
  virtual HttpResponse Refusal(int status, const std::string& message) = 0;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_HTTP_SERVICE_H_
