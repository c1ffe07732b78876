#include "server/common/log.h"

#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace linserve {
namespace {

void Log(std::string_view level, std::string_view event, nlohmann::json fields) {
  nlohmann::json line = nlohmann::json::object();
  line["ts"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  line["level"] = level;
  line["event"] = event;
  if (fields.is_object()) line.update(fields);
  // Invalid UTF-8 in a field becomes U+FFFD rather than an exception.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void LogInfo(std::string_view event, nlohmann::json fields) { Log("info", event, std::move(fields)); }
void LogWarning(std::string_view event, nlohmann::json fields) {
  Log("warning", event, std::move(fields));
}
void LogError(std::string_view event, nlohmann::json fields) { Log("error", event, std::move(fields)); }

}  // namespace linserve
