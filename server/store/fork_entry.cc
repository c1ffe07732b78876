#include "server/store/fork_entry.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/base/sha256.h"
#include "nlohmann/json.hpp"

namespace linserve {
namespace {

constexpr char kForkMagic[] = "LNSVFORK";
constexpr size_t kMagicBytes = sizeof(kForkMagic) - 1;
constexpr size_t kChecksumBytes = 32;

}  // namespace

bool IsForkLink(std::string_view bytes) {
  return bytes.size() >= kMagicBytes && bytes.compare(0, kMagicBytes, kForkMagic) == 0;
}

std::string EncodeForkLink(const SessionRecord& header) {
  const nlohmann::json fields = {{"tenant", header.tenant},
                                 {"session_id", header.session_id},
                                 {"created_unix_ms", header.created_unix_ms},
                                 {"last_used_unix_ms", header.last_used_unix_ms}};
  std::string out = kForkMagic + fields.dump();
  out += Sha256Digest({std::string_view(out)});
  return out;
}

absl::StatusOr<std::string> AssembleForkFile(std::string_view link, std::string_view base) {
  if (!IsForkLink(link) || link.size() < kMagicBytes + kChecksumBytes ||
      Sha256Digest({link.substr(0, link.size() - kChecksumBytes)}) !=
          link.substr(link.size() - kChecksumBytes)) {
    return absl::DataLossError("a fork's link file is damaged (its checksum does not match)");
  }
  const nlohmann::json fields = nlohmann::json::parse(
      link.substr(kMagicBytes, link.size() - kMagicBytes - kChecksumBytes), nullptr,
      /*allow_exceptions=*/false);
  if (!fields.is_object() || !fields.contains("session_id") || !fields["session_id"].is_string() ||
      !fields.contains("tenant") || !fields["tenant"].is_string() ||
      !fields.contains("created_unix_ms") || !fields["created_unix_ms"].is_number_integer() ||
      !fields.contains("last_used_unix_ms") || !fields["last_used_unix_ms"].is_number_integer()) {
    return absl::DataLossError("a fork's link file does not hold its fields");
  }
  absl::StatusOr<SessionRecord> record =
      DecodeStateFile(base, std::numeric_limits<int64_t>::max());
  if (!record.ok()) {
    return absl::DataLossError(
        absl::StrCat("the state file a fork was made from: ", record.status().message()));
  }
  record->tenant = fields["tenant"].get<std::string>();
  record->session_id = fields["session_id"].get<std::string>();
  record->created_unix_ms = fields["created_unix_ms"].get<int64_t>();
  record->last_used_unix_ms = fields["last_used_unix_ms"].get<int64_t>();
  return EncodeStateFile(*record);
}

}  // namespace linserve
