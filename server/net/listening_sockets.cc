#include "server/net/listening_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

// Binds and listens on one address; the fd, or -errno.
int BindOne(const BindAddress& address, int port, int& bound_port) {
  sockaddr_storage storage = {};
  socklen_t length = 0;
  if (address.v6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, address.ip.c_str(), &in6->sin6_addr);
    length = sizeof(*in6);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&storage);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, address.ip.c_str(), &in4->sin_addr);
    length = sizeof(*in4);
  }
  const int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  int error = 0;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      (address.v6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
      bind(fd, reinterpret_cast<sockaddr*>(&storage), length) != 0 || listen(fd, SOMAXCONN) != 0) {
    error = errno;
  }
  if (error == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    error = errno;
  }
  if (error != 0) {
    close(fd);
    return -error;
  }
  bound_port = ntohs(address.v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                                : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
  return fd;
}

// The machine lacks this family or address (IPv6 disabled, a name that
// resolves to an address of another host).
bool FamilyMissing(int error) {
  return error == EAFNOSUPPORT || error == EADDRNOTAVAIL || error == EPROTONOSUPPORT;
}

}  // namespace

absl::StatusOr<std::vector<ListeningSocket>> OpenListeningSockets(const ListenAddress& address) {
  absl::StatusOr<std::vector<BindAddress>> resolved = ResolveListenAddress(address);
  if (!resolved.ok()) return resolved.status();
  std::vector<ListeningSocket> sockets;
  int port = address.port;
  std::string skipped;
  for (const BindAddress& bind : *resolved) {
    int bound_port = 0;
    const int fd = BindOne(bind, port, bound_port);
    if (fd < 0 && bind.optional && FamilyMissing(-fd)) {
      absl::StrAppend(&skipped, skipped.empty() ? "" : "; ", JoinHostPort(bind.ip, port), ": ",
                      std::strerror(-fd));
      continue;
    }
    if (fd < 0) {
      CloseListeningSockets(sockets);
      return absl::UnavailableError(absl::StrCat("--", address.flag, "=", address.ToString(),
                                                 ": cannot listen on ", JoinHostPort(bind.ip, port),
                                                 ": ", std::strerror(-fd)));
    }
    port = bound_port;  // a port-0 address shares the first one's pick
    sockets.push_back({fd, bind.ip, bound_port, bind.v6});
  }
  if (sockets.empty()) {
    return absl::UnavailableError(absl::StrCat("--", address.flag, "=", address.ToString(),
                                               ": no address could be bound (", skipped, ")"));
  }
  return sockets;
}

void CloseListeningSockets(std::vector<ListeningSocket>& sockets) {
  for (ListeningSocket& s : sockets) {
    if (s.fd >= 0) close(s.fd);
    s.fd = -1;
  }
}

std::vector<std::string> HostPorts(const std::vector<ListeningSocket>& sockets) {
  std::vector<std::string> out;
  for (const ListeningSocket& s : sockets) out.push_back(JoinHostPort(s.ip, s.port));
  return out;
}

bool BeyondLoopback(const std::vector<ListeningSocket>& sockets) {
  for (const ListeningSocket& s : sockets) {
    if (!IsLoopbackIp(s.ip)) return true;
  }
  return false;
}

}  // namespace linserve
