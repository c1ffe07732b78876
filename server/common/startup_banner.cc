#include "server/common/startup_banner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace linserve {
namespace {

// "http://127.0.0.1:8080/x and http://[::1]:8080/x".
std::string Addresses(const std::vector<std::string>& host_ports, const std::string& prefix,
                      const std::string& suffix) {
  return absl::StrJoin(host_ports, " and ", [&](std::string* out, const std::string& hp) {
    absl::StrAppend(out, prefix, hp, suffix);
  });
}

}  // namespace

std::string ShortCount(int64_t n) {
  if (n >= 1'000'000'000) return absl::StrFormat("%.1fB", n / 1e9);
  if (n >= 1'000'000) return absl::StrFormat("%.1fM", n / 1e6);
  if (n >= 1'000) return absl::StrFormat("%.1fK", n / 1e3);
  return absl::StrCat(n);
}

std::string ShortBytes(int64_t bytes) {
  if (bytes >= 1'000'000'000) return absl::StrFormat("%.1f GB", bytes / 1e9);
  if (bytes >= 1'000'000) return absl::StrFormat("%.1f MB", bytes / 1e6);
  if (bytes >= 1'000) return absl::StrFormat("%.1f kB", bytes / 1e3);
  return absl::StrCat(bytes, " B");
}

std::string StartupBanner(const StartupFacts& facts) {
  const std::string scheme = facts.tls ? "https://" : "http://";
  std::vector<std::string> ports;
  if (!facts.grpc.empty()) ports.push_back(absl::StrCat("grpc ", Addresses(facts.grpc, "", "")));
  if (!facts.http.empty()) ports.push_back(absl::StrCat("http ", Addresses(facts.http, scheme, "")));
  if (!facts.metrics.empty()) {
    ports.push_back(absl::StrCat("metrics ", Addresses(facts.metrics, "http://", "/metrics")));
  }
  if (!facts.health.empty()) {
    ports.push_back(absl::StrCat("health ", Addresses(facts.health, "http://", "/health")));
  }
  return absl::StrCat("linserve: serving \"", facts.served_model_name, "\" (", facts.architecture,
                      ", ", ShortCount(facts.weight_elements), " parameters, ",
                      ShortBytes(facts.weight_bytes), ") on ", absl::StrJoin(ports, ", "));
}

}  // namespace linserve
