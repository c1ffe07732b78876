#include "server/store/disk_state_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/base/sha256.h"
#include "server/store/atomic_file.h"
#include "server/store/fork_entry.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

constexpr char kExtension[] = ".state";
// A fork stored by reference: the hard link to its source's file, beside its
// link file (server/store/fork_entry.h).
constexpr char kBaseExtension[] = ".base";
// Under the store's directory; LoadAll and Open's count of session files
// skip it, as they skip everything that is not a *.state file.
constexpr char kNamedDir[] = "named";

bool IsStateFile(const fs::directory_entry& entry) {
  return absl::EndsWith(entry.path().filename().string(), kExtension) && entry.is_regular_file();
}

// True when the file at `path` begins as a fork's link file. False for a
// file that is not there or cannot be read (the caller then reads it and
// says why).
bool HoldsForkLink(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  in.read(head, sizeof(head));
  return in.gcount() == sizeof(head) && IsForkLink(std::string_view(head, sizeof(head)));
}

// `path` with kBaseExtension in place of kExtension.
fs::path BaseOf(const fs::path& state_path) {
  fs::path base = state_path;
  return base.replace_extension(kBaseExtension);
}

// Removes the bases no fork's link file refers to: a crash between linking
// the base and writing the link file, or between a fork's first own write
// and the removal of its base. Returns how many.
absl::StatusOr<int> RemoveOrphanBases(const std::string& dir) {
  int removed = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() != kBaseExtension) continue;
    fs::path main = entry.path();
    main.replace_extension(kExtension);
    if (!HoldsForkLink(main) && fs::remove(entry.path(), error)) ++removed;
  }
  if (error) return absl::InternalError(absl::StrCat("clean ", dir, ": ", error.message()));
  return removed;
}

// The state file at `path`: the file itself, or, for a fork stored by
// reference, its source's file with the fork's fields.
absl::StatusOr<std::string> ReadStateFile(const fs::path& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path.string());
  if (!bytes.ok() || !IsForkLink(*bytes)) return bytes;
  absl::StatusOr<std::string> base = ReadFile(BaseOf(path).string());
  if (!base.ok()) {
    return absl::DataLossError(absl::StrCat("a fork's source file is missing: ",
                                            base.status().message()));
  }
  return AssembleForkFile(*bytes, *base);
}

bool IsHex(absl::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); });
}

// The named state a file name `<hex of name>.<digest>.state` stands for, or
// nothing for any other file (a write's temporary ends in its own suffix).
std::optional<NamedStateListing> ParseNamedFileName(absl::string_view file_name) {
  if (!absl::ConsumeSuffix(&file_name, kExtension)) return std::nullopt;
  // Neither part holds a '.': the name is hex, the digest too.
  std::vector<absl::string_view> parts = absl::StrSplit(file_name, '.');
  if (parts.size() != 2 || parts[0].empty() || parts[0].size() % 2 != 0 || !IsHex(parts[0])) {
    return std::nullopt;
  }
  NamedStateListing listing;
  listing.name = absl::HexStringToBytes(parts[0]);
  listing.digest = std::string(parts[1]);
  if (!CheckNamedStateDigest(listing.digest).ok()) return std::nullopt;
  return listing;
}

// The named states in one tenant's directory, in no order; none when the
// directory is not there (the tenant never stored one).
absl::StatusOr<std::vector<NamedStateListing>> ListNamedDir(const fs::path& dir) {
  std::vector<NamedStateListing> listings;
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error == std::errc::no_such_file_or_directory) return listings;
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    std::optional<NamedStateListing> listing = ParseNamedFileName(it->path().filename().string());
    if (!listing.has_value()) continue;
    std::error_code stat_error;
    listing->bytes = static_cast<int64_t>(it->file_size(stat_error));
    // Deleted while listed: not there.
    if (stat_error == std::errc::no_such_file_or_directory) continue;
    if (stat_error) {
      return absl::InternalError(
          absl::StrCat("size of ", it->path().string(), ": ", stat_error.message()));
    }
    listings.push_back(*std::move(listing));
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir.string(), ": ", error.message()));
  return listings;
}

// What Open finds of a previous run's named states.
struct NamedStatesFound {
  int64_t bytes = 0;
  int stale_temp_files_removed = 0;
};

absl::StatusOr<NamedStatesFound> FindNamedStatesOnDisk(const fs::path& root) {
  NamedStatesFound found;
  std::error_code error;
  fs::directory_iterator it(root, error);
  if (error == std::errc::no_such_file_or_directory) return found;
  for (; !error && it != fs::directory_iterator(); it.increment(error)) {
    if (!it->is_directory(error) || error) continue;
    absl::StatusOr<int> removed = RemoveStaleTempFiles(it->path().string());
    if (!removed.ok()) return removed.status();
    found.stale_temp_files_removed += *removed;
    absl::StatusOr<std::vector<NamedStateListing>> listed = ListNamedDir(it->path());
    if (!listed.ok()) return listed.status();
    for (const NamedStateListing& listing : *listed) found.bytes += listing.bytes;
  }
  if (error) {
    return absl::InternalError(absl::StrCat("list ", root.string(), ": ", error.message()));
  }
  return found;
}

absl::Status NamedStateNotFound(const NamedStateKey& key) {
  // The name is one the server checked ([A-Za-z0-9._-]), safe to echo.
  return absl::NotFoundError(absl::StrCat("no named state \"", key.name, "\""));
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
  absl::StatusOr<int> orphans = RemoveOrphanBases(dir);
  if (!orphans.ok()) return orphans.status();
  *removed += *orphans;
  absl::StatusOr<NamedStatesFound> named = FindNamedStatesOnDisk(fs::path(dir) / kNamedDir);
  if (!named.ok()) return named.status();
  std::unique_ptr<DiskStateStore> store(
      new DiskStateStore(dir, max_bytes, *removed + named->stale_temp_files_removed));
  // Files a previous run left count from the start, so a restart cannot
  // reset the budget. A directory already past it still opens: it serves
  // what it holds and refuses to grow.
  absl::MutexLock lock(&store->mu_);
  store->bytes_ = named->bytes;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!IsStateFile(entry)) continue;
    auto size = static_cast<int64_t>(entry.file_size(error));
    if (error) break;
    if (HoldsForkLink(entry.path())) {
      // A fork's base that is gone leaves a fork Get answers DATA_LOSS for.
      std::error_code base_error;
      const auto base_size = fs::file_size(BaseOf(entry.path()), base_error);
      if (!base_error) size += static_cast<int64_t>(base_size);
    }
    store->sizes_[entry.path().filename().string()] = size;
    store->bytes_ += size;
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir, ": ", error.message()));
  return store;
}

std::string DiskStateStore::PathOf(const StoredSessionKey& key) const {
  return (std::filesystem::path(dir_) / (StoredSessionName(key) + kExtension)).string();
}

std::string DiskStateStore::BasePathOf(const StoredSessionKey& key) const {
  return BaseOf(PathOf(key)).string();
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
  if (written.ok()) {
    // A fork stored by reference now has its own file.
    std::error_code ignored;
    fs::remove(BasePathOf(key), ignored);
  } else {
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
  return ReadStateFile(PathOf(key));
}

absl::Status DiskStateStore::PutFork(const StoredSessionKey& fork, const StoredSessionKey& source,
                                     const SessionRecord& header) {
  // The file the fork's state is: the source's, or, for a source that is a
  // fork stored by reference itself, the one it refers to.
  fs::path source_file = PathOf(source);
  if (HoldsForkLink(source_file)) source_file = BaseOf(source_file);
  std::error_code error;
  const auto base_size = static_cast<int64_t>(fs::file_size(source_file, error));
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("the state file of the session forked: ", error.message()));
  }
  const std::string link = EncodeForkLink(header);
  const std::string name = StoredSessionName(fork) + kExtension;
  const int64_t size = base_size + static_cast<int64_t>(link.size());
  {
    absl::MutexLock lock(&mu_);
    if (sizes_.contains(name)) {
      return absl::AlreadyExistsError("a fork's id is stored already");
    }
    if (bytes_ + size > max_bytes_) return Full(size);
    bytes_ += size;
    sizes_[name] = size;
  }
  const std::string temp = BasePathOf(fork) + kTempSuffix + "link";
  fs::remove(temp, error);
  absl::Status stored = absl::OkStatus();
  if (::link(source_file.c_str(), temp.c_str()) != 0) {
    stored = absl::InternalError(absl::StrCat("link the forked session's file: ",
                                              std::strerror(errno)));
  } else {
    fs::rename(temp, BasePathOf(fork), error);
    if (error) {
      stored = absl::InternalError(absl::StrCat("rename a fork's base: ", error.message()));
    } else {
      // Its rename also makes the base's name durable (one directory).
      stored = WriteFileAtomically(PathOf(fork), link);
    }
  }
  if (!stored.ok()) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    fs::remove(BasePathOf(fork), ignored);
    absl::MutexLock lock(&mu_);
    bytes_ -= size;
    sizes_.erase(name);
  }
  return stored;
}

absl::Status DiskStateStore::Delete(const StoredSessionKey& key) {
  std::error_code error;
  std::filesystem::remove(PathOf(key), error);
  if (!error) std::filesystem::remove(BasePathOf(key), error);
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
    absl::StatusOr<std::string> bytes = ReadStateFile(entry.path());
    // A fork whose link or base is damaged: its link file, which the caller
    // refuses as it refuses any damaged state file.
    if (bytes.status().code() == absl::StatusCode::kDataLoss) {
      bytes = ReadFile(entry.path().string());
    }
    if (!bytes.ok()) return bytes.status();
    files.push_back(*std::move(bytes));
  }
  if (error) return absl::InternalError(absl::StrCat("list ", dir_, ": ", error.message()));
  return files;
}

std::string DiskStateStore::NamedDirOf(const std::string& tenant) const {
  return (fs::path(dir_) / kNamedDir / Sha256Hex({std::string_view(tenant)})).string();
}

std::string DiskStateStore::NamedPathOf(const NamedStateKey& key, const std::string& digest) const {
  return (fs::path(NamedDirOf(key.tenant)) /
          absl::StrCat(absl::BytesToHexString(key.name), ".", digest, kExtension))
      .string();
}

absl::Status DiskStateStore::Reserve(int64_t size) {
  absl::MutexLock lock(&mu_);
  if (bytes_ + size > max_bytes_) return Full(size);
  bytes_ += size;
  return absl::OkStatus();
}

void DiskStateStore::Release(int64_t size) {
  absl::MutexLock lock(&mu_);
  bytes_ -= size;
}

absl::Status DiskStateStore::PutNamedState(const NamedStateKey& key, const std::string& digest,
                                           const std::string& state_file) {
  // The digest becomes part of a file name.
  if (absl::Status valid = CheckNamedStateDigest(digest); !valid.ok()) return valid;
  absl::MutexLock named(&named_mu_);
  absl::StatusOr<NamedStateListing> existing = FindNamedState(key);
  if (existing.ok()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "named state \"", key.name, "\" already exists; a name is never replaced: delete it "
        "first or choose another name"));
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  const auto size = static_cast<int64_t>(state_file.size());
  if (absl::Status room = Reserve(size); !room.ok()) return room;
  std::error_code error;
  fs::create_directories(NamedDirOf(key.tenant), error);
  absl::Status written =
      error ? absl::InternalError(absl::StrCat("named state directory: ", error.message()))
            : WriteFileAtomically(NamedPathOf(key, digest), state_file);
  if (!written.ok()) Release(size);
  return written;
}

absl::StatusOr<NamedStateListing> DiskStateStore::FindNamedState(const NamedStateKey& key) {
  absl::StatusOr<std::vector<NamedStateListing>> listed = ListNamedDir(NamedDirOf(key.tenant));
  if (!listed.ok()) return listed.status();
  for (NamedStateListing& listing : *listed) {
    if (listing.name == key.name) return std::move(listing);
  }
  return NamedStateNotFound(key);
}

absl::StatusOr<std::string> DiskStateStore::GetNamedState(const NamedStateKey& key) {
  absl::StatusOr<NamedStateListing> listing = FindNamedState(key);
  if (!listing.ok()) return listing.status();
  absl::StatusOr<std::string> file = ReadFile(NamedPathOf(key, listing->digest));
  // Deleted since it was listed.
  if (absl::IsNotFound(file.status())) return NamedStateNotFound(key);
  return file;
}

absl::Status DiskStateStore::DeleteNamedState(const NamedStateKey& key) {
  absl::MutexLock named(&named_mu_);
  absl::StatusOr<NamedStateListing> listing = FindNamedState(key);
  if (!listing.ok()) return listing.status();
  std::error_code error;
  fs::remove(NamedPathOf(key, listing->digest), error);
  if (error) return absl::InternalError(absl::StrCat("delete named state: ", error.message()));
  Release(listing->bytes);
  // A tenant's last one takes its directory along; remove() leaves a
  // directory that still holds files, and that error is no error here.
  fs::remove(NamedDirOf(key.tenant), error);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NamedStateListing>> DiskStateStore::ListNamedStates(
    const std::string& tenant) {
  absl::StatusOr<std::vector<NamedStateListing>> listed = ListNamedDir(NamedDirOf(tenant));
  if (!listed.ok()) return listed.status();
  std::sort(listed->begin(), listed->end(),
            [](const NamedStateListing& a, const NamedStateListing& b) { return a.name < b.name; });
  return listed;
}

}  // namespace linserve
