#include "tests/server/gated_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

// Writes all of `bytes`; false when the peer is gone.
bool WriteAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GatedProxy>> GatedProxy::Start(int target_port) {
  std::unique_ptr<GatedProxy> proxy(new GatedProxy());
  proxy->target_port_ = target_port;
  proxy->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (::bind(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(proxy->listen_fd_, 16) != 0 ||
      ::getsockname(proxy->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return absl::InternalError(absl::StrCat("proxy listen: errno ", errno));
  }
  proxy->port_ = ntohs(addr.sin_port);
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

GatedProxy::~GatedProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  for (std::thread& relay : relays_) relay.join();
  ::close(listen_fd_);
}

void GatedProxy::Close() {
  absl::MutexLock lock(&mu_);
  open_ = false;
  held_.clear();
}

void GatedProxy::Open() {
  absl::MutexLock lock(&mu_);
  open_ = true;
}

bool GatedProxy::WaitHeld(absl::string_view needle, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Arg {
    GatedProxy* proxy;
    absl::string_view needle;
  } arg{this, needle};
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return absl::StrContains(a->proxy->held_, a->needle);
                                  },
                                  &arg),
                              timeout);
}

void GatedProxy::AcceptLoop() {
  while (true) {
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      if (errno == EINTR) continue;
      return;  // shut down
    }
    const int target = ConnectLoopback(target_port_);
    if (target < 0) {
      ::close(client);
      continue;
    }
    relays_.emplace_back([this, client, target] { Relay(client, target); });
  }
}

void GatedProxy::Relay(int client, int target) {
  std::string pending;  // from the client, not yet forwarded
  char buffer[1 << 16];
  bool alive = true;
  while (alive) {
    bool open;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      open = open_;
    }
    if (open && !pending.empty()) {
      if (!WriteAll(target, pending)) break;
      pending.clear();
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {target, POLLIN, 0}};
    // A short wait, so that opening the gate and stopping are seen soon.
    if (::poll(fds, 2, 10) < 0 && errno != EINTR) break;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        alive = false;
      } else {
        pending.append(buffer, static_cast<size_t>(n));
        absl::MutexLock lock(&mu_);
        if (!open_) held_.append(buffer, static_cast<size_t>(n));
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::recv(target, buffer, sizeof(buffer), 0);
      if (n <= 0 || !WriteAll(client, std::string(buffer, static_cast<size_t>(n)))) alive = false;
    }
  }
  ::close(client);
  ::close(target);
}

}  // namespace linserve
