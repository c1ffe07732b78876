#ifndef LINSERVE_SERVER_NET_LISTEN_ADDRESS_H_
#define LINSERVE_SERVER_NET_LISTEN_ADDRESS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

// A listen flag's value as users write it: "localhost:8080",
// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:8080", "host.example:8080", or
// ":8080" (every interface, asked for explicitly).
struct ListenAddress {
  std::string flag;  // the flag it came from, without "--": named in errors
  std::string host;  // as written, brackets removed; empty: every interface
  int port = 0;      // 0 picks a free one

  // "host:port" as given (brackets around an IPv6 literal), for messages.
  std::string ToString() const;
};

// Parses `text`; InvalidArgument names `flag`, the value and the expected form.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view flag, absl::string_view text);

// The same from a separate host and port (--metrics_host, --metrics_port).
absl::StatusOr<ListenAddress> ListenAddressOf(absl::string_view flag, absl::string_view host,
                                              int port);

// One numeric address to bind.
struct BindAddress {
  std::string ip;  // "127.0.0.1", "::1", "0.0.0.0", "::"
  bool v6 = false;
  // True where the address came from a name or from "every interface": a
  // family the machine lacks (no IPv6) is skipped there, while a literal the
  // user wrote must bind.
  bool optional = false;
};

// The addresses `address` stands for, resolved now (getaddrinfo): a literal
// is itself; a name is every address it resolves to (localhost: 127.0.0.1
// and ::1 where the machine has them); every interface is 0.0.0.0 and ::.
// Unavailable names the flag and the host.
absl::StatusOr<std::vector<BindAddress>> ResolveListenAddress(const ListenAddress& address);

// True for 127.0.0.0/8, ::1 and ::ffff:127.x.
bool IsLoopbackIp(absl::string_view ip);

// "127.0.0.1:8080" or "[::1]:8080".
std::string JoinHostPort(absl::string_view ip, int port);

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_LISTEN_ADDRESS_H_
