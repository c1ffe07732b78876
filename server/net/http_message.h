#ifndef LINSERVE_SERVER_NET_HTTP_MESSAGE_H_
#define LINSERVE_SERVER_NET_HTTP_MESSAGE_H_

// An HTTP/1 request and answer as the handlers see them: plain strings, no
// Boost in the header (the transport's parser and writer are in
// http_connection.cc).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace linserve {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path and query
  std::string path;    // the target up to '?'
  HttpHeaders headers;
  std::string body;  // empty until the body is read
  std::string peer;  // "address:port" of the client

  // The first value of a header, its name matched without case; "" when
  // absent.
  std::string Header(absl::string_view name) const;
  bool HasHeader(absl::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // beside Content-Type and the framing
  std::string body;
};

// The reason phrase of a status ("Too Many Requests").
absl::string_view HttpReason(int status);

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_HTTP_MESSAGE_H_
