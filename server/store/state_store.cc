#include "server/store/state_store.h"

#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/base/sha256.h"

namespace linserve {

std::string StoredSessionName(const StoredSessionKey& key) {
  return Sha256Hex({std::string_view(key.tenant), std::string_view("\0", 1),
                    std::string_view(key.session_id)});
}

absl::Status CheckNamedStateDigest(const std::string& digest) {
  constexpr size_t kDigestHexDigits = 64;
  bool hex = digest.size() == kDigestHexDigits;
  for (char c : digest) hex = hex && absl::ascii_isxdigit(static_cast<unsigned char>(c));
  if (hex) return absl::OkStatus();
  // Not echoed: it may be any bytes.
  return absl::InvalidArgumentError(absl::StrCat("a named state's digest must be ",
                                                 kDigestHexDigits, " hex digits, not ",
                                                 digest.size(), " bytes of other text"));
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

namespace {

absl::Status NoNamedStates() {
  return absl::UnimplementedError("this state store cannot hold named states");
}

}  // namespace

absl::Status StateStore::PutNamedState(const NamedStateKey& /*key*/, const std::string& /*digest*/,
                                       const std::string& /*state_file*/) {
  return NoNamedStates();
}

absl::StatusOr<NamedStateListing> StateStore::FindNamedState(const NamedStateKey& /*key*/) {
  return NoNamedStates();
}

absl::StatusOr<std::string> StateStore::GetNamedState(const NamedStateKey& /*key*/) {
  return NoNamedStates();
}

absl::Status StateStore::DeleteNamedState(const NamedStateKey& /*key*/) { return NoNamedStates(); }

absl::StatusOr<std::vector<NamedStateListing>> StateStore::ListNamedStates(
    const std::string& /*tenant*/) {
  return NoNamedStates();
}

absl::Status StateStore::PutFork(const StoredSessionKey& /*fork*/,
                                 const StoredSessionKey& /*source*/,
                                 const SessionRecord& /*header*/) {
  return absl::UnimplementedError("this session store writes a fork's state file whole");
}

}  // namespace linserve
