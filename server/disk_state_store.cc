#include "server/disk_state_store.h"

#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/atomic_file.h"

namespace linserve {
namespace {

constexpr char kExtension[] = ".state";

}  // namespace

absl::StatusOr<std::unique_ptr<DiskStateStore>> DiskStateStore::Open(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("state store ", dir, ": ", error.message()));
  }
  // A write killed between creating its temporary and renaming it leaves the
  // temporary behind; the state file itself is whole (old or new).
  absl::StatusOr<int> removed = RemoveStaleTempFiles(dir);
  if (!removed.ok()) return removed.status();
  return std::unique_ptr<DiskStateStore>(new DiskStateStore(dir, *removed));
}

std::string DiskStateStore::PathOf(const StoredSessionKey& key) const {
  return (std::filesystem::path(dir_) / (StoredSessionName(key) + kExtension)).string();
}

absl::Status DiskStateStore::Put(const StoredSessionKey& key, const std::string& state_file) {
  return WriteFileAtomically(PathOf(key), state_file);
}

absl::StatusOr<std::string> DiskStateStore::Get(const StoredSessionKey& key) {
  return ReadFile(PathOf(key));
}

absl::Status DiskStateStore::Delete(const StoredSessionKey& key) {
  std::error_code error;
  std::filesystem::remove(PathOf(key), error);
  if (error) return absl::InternalError(absl::StrCat("delete session: ", error.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> DiskStateStore::LoadAll() {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    const std::string name = entry.path().filename().string();
    if (!absl::EndsWith(name, kExtension) || !entry.is_regular_file()) continue;
    absl::StatusOr<std::string> bytes = ReadFile(entry.path().string());
    if (!bytes.ok()) return bytes.status();
    files.push_back(*std::move(bytes));
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir_, ": ", error.message()));
  return files;
}

}  // namespace linserve
