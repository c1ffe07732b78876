#ifndef LINSERVE_SERVER_NET_LISTENING_SOCKETS_H_
#define LINSERVE_SERVER_NET_LISTENING_SOCKETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/net/listen_address.h"

namespace linserve {

// One bound, listening TCP socket. The caller owns `fd`.
struct ListeningSocket {
  int fd = -1;
  std::string ip;  // numeric, as bound
  int port = 0;    // as bound (the one picked, for port 0)
  bool v6 = false;
};

// Resolves `address` and binds and listens on every address it stands for,
// all on one port: with port 0, the port the first one picked. IPv6
// sockets are IPv6-only, so that "every interface" binds 0.0.0.0 and ::
// side by side. An address of a name or of every interface whose family
// the machine lacks is skipped while another binds. SO_REUSEADDR, never
// SO_REUSEPORT: a second server on a taken port fails here.
// Errors name the flag, the address and the reason ("Address already in
// use"); nothing stays open after an error.
absl::StatusOr<std::vector<ListeningSocket>> OpenListeningSockets(const ListenAddress& address);

// Closes every socket's fd.
void CloseListeningSockets(std::vector<ListeningSocket>& sockets);

// {"127.0.0.1:8080", "[::1]:8080"}.
std::vector<std::string> HostPorts(const std::vector<ListeningSocket>& sockets);

// True when any socket is bound to an address other than loopback.
bool BeyondLoopback(const std::vector<ListeningSocket>& sockets);

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_LISTENING_SOCKETS_H_
