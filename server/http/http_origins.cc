#include "server/http/http_origins.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace linserve {

std::string HostWithoutPort(absl::string_view host) {
  host = absl::StripAsciiWhitespace(host);
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    return absl::AsciiStrToLower(host.substr(1, close == absl::string_view::npos ? host.npos : close - 1));
  }
  const size_t colon = host.rfind(':');
  return absl::AsciiStrToLower(colon == absl::string_view::npos ? host : host.substr(0, colon));
}

OriginVerdict JudgeOrigin(const OriginPolicy& policy, absl::string_view origin,
                          absl::string_view host) {
  const auto& cors = policy.cors_origins;
  if (std::find(cors.begin(), cors.end(), origin) != cors.end() ||
      std::find(cors.begin(), cors.end(), "*") != cors.end()) {
    return OriginVerdict::kCors;
  }
  const std::string own = absl::StrCat(policy.tls ? "https://" : "http://",
                                       absl::AsciiStrToLower(absl::StripAsciiWhitespace(host)));
  if (host.empty() || !absl::EqualsIgnoreCase(origin, own)) return OriginVerdict::kRefused;
  const std::string name = HostWithoutPort(host);
  const auto& hosts = policy.allowed_hosts;
  return std::find(hosts.begin(), hosts.end(), name) != hosts.end() ? OriginVerdict::kSameOrigin
                                                                    : OriginVerdict::kRefused;
}

std::vector<std::string> DefaultAllowedHosts(const ListenAddress& listen) {
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  const std::string own = absl::AsciiStrToLower(listen.host);
  const bool every_interface = own.empty() || own == "0.0.0.0" || own == "::";
  if (!every_interface && std::find(hosts.begin(), hosts.end(), own) == hosts.end()) {
    hosts.push_back(own);
  }
  return hosts;
}

}  // namespace linserve
