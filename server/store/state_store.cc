#include "server/store/state_store.h"

#include <string_view>

#include "engine/base/sha256.h"

namespace linserve {

std::string StoredSessionName(const StoredSessionKey& key) {
  return Sha256Hex({std::string_view(key.tenant), std::string_view("\0", 1),
                    std::string_view(key.session_id)});
}

absl::StatusOr<int64_t> StateStore::PutFenced(const StoredSessionKey& key,
                                              const std::string& state_file,
                                              const WriteFence& /*fence*/) {
  absl::Status put = Put(key, state_file);
  if (!put.ok()) return put;
  return 0;
}

absl::StatusOr<VersionedStateFile> StateStore::GetVersioned(const StoredSessionKey& key) {
  absl::StatusOr<std::string> file = Get(key);
  if (!file.ok()) return file.status();
  return VersionedStateFile{*std::move(file), 0};
}

absl::StatusOr<int64_t> StateStore::VersionOf(const StoredSessionKey& /*key*/) { return 0; }

}  // namespace linserve
