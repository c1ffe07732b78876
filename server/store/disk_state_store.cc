#include "server/store/disk_state_store.h"

#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/atomic_file.h"

namespace linserve {
namespace {

constexpr char kExtension[] = ".state";

bool IsStateFile(const std::filesystem::directory_entry& entry) {
  return absl::EndsWith(entry.path().filename().string(), kExtension) && entry.is_regular_file();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskStateStore>> DiskStateStore::Open(const std::string& dir,
                                                                      int64_t max_bytes) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("state store ", dir, ": ", error.message()));
  }
  // A write killed between creating its temporary and renaming it leaves the
  // temporary behind; the state file itself is whole (old or new).
  absl::StatusOr<int> removed = RemoveStaleTempFiles(dir);
  if (!removed.ok()) return removed.status();
  std::unique_ptr<DiskStateStore> store(new DiskStateStore(dir, max_bytes, *removed));
  // Files a previous run left count from the start, so a restart cannot
  // reset the budget. A directory already past it still opens: it serves
  // what it holds and refuses to grow.
  absl::MutexLock lock(&store->mu_);
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!IsStateFile(entry)) continue;
    const auto size = static_cast<int64_t>(entry.file_size(error));
    if (error) break;
    store->sizes_[entry.path().filename().string()] = size;
    store->bytes_ += size;
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir, ": ", error.message()));
  return store;
}

std::string DiskStateStore::PathOf(const StoredSessionKey& key) const {
  return (std::filesystem::path(dir_) / (StoredSessionName(key) + kExtension)).string();
}

int64_t DiskStateStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

absl::Status DiskStateStore::Full(int64_t needed) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the session store holds ", bytes_, " bytes and ", needed,
      " more would pass max_store_bytes = ", max_bytes_,
      "; delete sessions or raise --max_store_bytes"));
}

absl::Status DiskStateStore::CheckRoom(int64_t more_bytes) const {
  absl::MutexLock lock(&mu_);
  if (bytes_ + more_bytes > max_bytes_) return Full(more_bytes);
  return absl::OkStatus();
}

absl::Status DiskStateStore::Put(const StoredSessionKey& key, const std::string& state_file) {
  const std::string name = StoredSessionName(key) + kExtension;
  const auto size = static_cast<int64_t>(state_file.size());
  int64_t old_size = 0;
  {
    // Reserve before writing, so two Puts cannot both take the last bytes.
    absl::MutexLock lock(&mu_);
    auto it = sizes_.find(name);
    old_size = it == sizes_.end() ? 0 : it->second;
    if (size > old_size && bytes_ + size - old_size > max_bytes_) return Full(size - old_size);
    bytes_ += size - old_size;
    sizes_[name] = size;
  }
  absl::Status written = WriteFileAtomically(PathOf(key), state_file);
  if (!written.ok()) {
    // The old file (if any) is untouched.
    absl::MutexLock lock(&mu_);
    bytes_ += old_size - size;
    if (old_size > 0) {
      sizes_[name] = old_size;
    } else {
      sizes_.erase(name);
    }
  }
  return written;
}

absl::StatusOr<std::string> DiskStateStore::Get(const StoredSessionKey& key) {
  return ReadFile(PathOf(key));
}

absl::Status DiskStateStore::Delete(const StoredSessionKey& key) {
  std::error_code error;
  std::filesystem::remove(PathOf(key), error);
  if (error) return absl::InternalError(absl::StrCat("delete session: ", error.message()));
  absl::MutexLock lock(&mu_);
  auto it = sizes_.find(StoredSessionName(key) + kExtension);
  if (it != sizes_.end()) {
    bytes_ -= it->second;
    sizes_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> DiskStateStore::LoadAll() {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    if (!IsStateFile(entry)) continue;
    absl::StatusOr<std::string> bytes = ReadFile(entry.path().string());
    if (!bytes.ok()) return bytes.status();
    files.push_back(*std::move(bytes));
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir_, ": ", error.message()));
  return files;
}

}  // namespace linserve
