#ifndef LINSERVE_SERVER_LOG_H_
#define LINSERVE_SERVER_LOG_H_

// Structured one-line logs on stderr: one JSON object per event, e.g.
//   {"ts":"2026-11-22T15:04:05.123Z","level":"info","event":"listening","port":50051}
// so that tests, log shippers and `jq` read them without a parser of ours.
// Thread-safe: each line is written with one call.

#include <string_view>

#include <nlohmann/json.hpp>

namespace linserve {

void LogInfo(std::string_view event, nlohmann::json fields = nlohmann::json::object());
void LogWarning(std::string_view event, nlohmann::json fields = nlohmann::json::object());
void LogError(std::string_view event, nlohmann::json fields = nlohmann::json::object());

}  // namespace linserve

#endif  // LINSERVE_SERVER_LOG_H_
