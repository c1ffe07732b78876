#ifndef LINSERVE_SERVER_HTTP_HTTP_ORIGINS_H_
#define LINSERVE_SERVER_HTTP_HTTP_ORIGINS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/net/listen_address.h"

namespace linserve {

// Which browser pages may call the API. A request without an Origin header
// (curl, SDKs) is not a page's and is never judged here.
struct OriginPolicy {
  // --http_cors_origins: other sites' pages allowed ("*": any).
  std::vector<std::string> cors_origins;
  // The host names and addresses this server answers to, in lower case
  // without a port: a page's own origin counts only on one of them.
  std::vector<std::string> allowed_hosts;
  bool tls = false;  // the page's scheme: https with TLS, else http
};

enum class OriginVerdict {
  kCors,        // listed in cors_origins: answered with CORS headers
  kSameOrigin,  // the server's own page (the playground)
  kRefused,
};

// A page at `origin` calling with the Host header `host`. Its own origin is
// "http(s)://" + Host; it is allowed only when that host is in
// allowed_hosts, so that DNS rebinding (a name of the attacker's resolving
// to this server, whose page is then same-origin with it) is refused.
OriginVerdict JudgeOrigin(const OriginPolicy& policy, absl::string_view origin,
                          absl::string_view host);

// The hosts a server listening on `listen` answers to by default: the
// loopback names (localhost, 127.0.0.1, ::1) and the listen flag's own host
// when it names one (not for every interface).
std::vector<std::string> DefaultAllowedHosts(const ListenAddress& listen);

// The host of a Host header value, without its port or IPv6 brackets, in
// lower case: "[::1]:8080" -> "::1", "LocalHost:8080" -> "localhost".
std::string HostWithoutPort(absl::string_view host);

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_HTTP_ORIGINS_H_
