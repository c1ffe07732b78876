#include "server/net/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

bool IsIpv4Literal(const std::string& host) {
  in_addr ignored;
  return inet_pton(AF_INET, host.c_str(), &ignored) == 1;
}

bool IsIpv6Literal(const std::string& host) {
  in6_addr ignored;
  return inet_pton(AF_INET6, host.c_str(), &ignored) == 1;
}

// Letters, digits, '-', '_' and '.': what a DNS name or /etc/hosts entry
// holds. Anything else (spaces, '/', '@') is a typo, not a host.
bool IsHostName(absl::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

absl::Status BadValue(absl::string_view flag, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, "=\"", text, "\": ", why,
      " (expected HOST:PORT, [IPV6]:PORT or :PORT for every interface, PORT in [0, 65535])"));
}

}  // namespace

std::string ListenAddress::ToString() const {
  if (host.empty()) return absl::StrCat(":", port);
  return JoinHostPort(host, port);
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view flag, absl::string_view text) {
  absl::string_view host, port_text;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return BadValue(flag, text, "a bracketed IPv6 host must be followed by :PORT");
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
    if (!IsIpv6Literal(std::string(host))) {
      return BadValue(flag, text, absl::StrCat("\"", host, "\" is not an IPv6 address"));
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return BadValue(flag, text, "no :PORT");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return BadValue(flag, text, "an IPv6 host must be in brackets, as [::1]:8080");
    }
    if (!host.empty() && !IsHostName(host)) {
      return BadValue(flag, text, absl::StrCat("\"", host, "\" is not a host name or address"));
    }
  }
  int port = -1;
  if (!absl::ascii_isdigit(port_text.empty() ? 'x' : port_text[0]) ||
      !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return BadValue(flag, text, absl::StrCat("\"", port_text, "\" is not a port"));
  }
  return ListenAddress{std::string(flag), std::string(host), port};
}

absl::StatusOr<ListenAddress> ListenAddressOf(absl::string_view flag, absl::string_view host,
                                              int port) {
  const bool v6 = absl::StrContains(host, ':') && !absl::StartsWith(host, "[");
  return ParseListenAddress(flag, absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port));
}

absl::StatusOr<std::vector<BindAddress>> ResolveListenAddress(const ListenAddress& address) {
  if (address.host.empty()) return std::vector<BindAddress>{{"0.0.0.0", false, true}, {"::", true, true}};
  if (IsIpv4Literal(address.host)) return std::vector<BindAddress>{{address.host, false, false}};
  if (IsIpv6Literal(address.host)) return std::vector<BindAddress>{{address.host, true, false}};
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(address.host.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat("--", address.flag, "=", address.ToString(),
                                               ": the host \"", address.host,
                                               "\" does not resolve (", gai_strerror(error), ")"));
  }
  std::vector<BindAddress> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET6
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
        inet_ntop(a->ai_family, raw, ip, sizeof(ip)) == nullptr) {
      continue;
    }
    BindAddress bind{ip, a->ai_family == AF_INET6, true};
    if (std::none_of(addresses.begin(), addresses.end(),
                     [&](const BindAddress& b) { return b.ip == bind.ip; })) {
      addresses.push_back(std::move(bind));
    }
  }
  freeaddrinfo(found);
  // IPv4 first: the banner and the port a port-0 name shares start there.
  std::stable_sort(addresses.begin(), addresses.end(),
                   [](const BindAddress& a, const BindAddress& b) { return !a.v6 && b.v6; });
  if (addresses.empty()) {
    return absl::UnavailableError(absl::StrCat("--", address.flag, "=", address.ToString(),
                                               ": the host \"", address.host,
                                               "\" resolves to no IPv4 or IPv6 address"));
  }
  return addresses;
}

bool IsLoopbackIp(absl::string_view ip) {
  return absl::StartsWith(ip, "127.") || ip == "::1" || absl::StartsWith(ip, "::ffff:127.");
}

std::string JoinHostPort(absl::string_view ip, int port) {
  if (absl::StrContains(ip, ':')) return absl::StrCat("[", ip, "]:", port);
  return absl::StrCat(ip, ":", port);
}

}  // namespace linserve
