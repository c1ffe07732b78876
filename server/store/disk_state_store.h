#ifndef LINSERVE_SERVER_DISK_STATE_STORE_H_
#define LINSERVE_SERVER_DISK_STATE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/store/state_store.h"

namespace linserve {

// State files in one directory, named by the SHA-256 of (tenant, session id),
// written atomically (server/store/atomic_file.h), holding at most `max_bytes` of
// state files in all. Thread-safe: every call touches one file, the rename
// is atomic, and the byte count is kept under a lock.
//
// Named states live beside them, one directory per tenant:
//   <dir>/named/<SHA-256 hex of tenant>/<hex of name>.<digest>.state
// so the listing of a tenant's directory is the index (digest from the file
// name, bytes from its size) and LoadAll, which reads only the top
// directory's files, never sees them. Their bytes count in bytes().
// A fork is stored by reference until its first own write (PutFork).
class DiskStateStore : public StateStore {
 public:
  // Creates `dir` if needed, removes temporaries a crash left there (named
  // states' directories included) and counts the bytes of the state files
  // already in it, named states' too (they count against `max_bytes`, which
  // is --max_store_bytes).
  static absl::StatusOr<std::unique_ptr<DiskStateStore>> Open(const std::string& dir,
                                                              int64_t max_bytes = INT64_MAX);

  // RESOURCE_EXHAUSTED, naming --max_store_bytes, when the file would take
  // the directory past `max_bytes` (a replaced file's old bytes are freed).
  absl::Status Put(const StoredSessionKey& key, const std::string& state_file) override;
  absl::StatusOr<std::string> Get(const StoredSessionKey& key) override;
  absl::Status Delete(const StoredSessionKey& key) override;
  absl::StatusOr<std::vector<std::string>> LoadAll() override;
  absl::Status CheckRoom(int64_t more_bytes) const override;
  // A fork's entry by reference (server/store/fork_entry.h): its link file
  // as <name>.state and a hard link to the source's file as <name>.base, so
  // that a fork's durable write is a few hundred bytes whatever the
  // session's length. The fork's first own Put replaces both. Its bytes
  // count as the whole file's against max_bytes (the disk holds them once).
  bool StoresForksByReference() const override { return true; }
  absl::Status PutFork(const StoredSessionKey& fork, const StoredSessionKey& source,
                       const SessionRecord& header) override;

  absl::Status PutNamedState(const NamedStateKey& key, const std::string& digest,
                             const std::string& state_file) override;
  absl::StatusOr<NamedStateListing> FindNamedState(const NamedStateKey& key) override;
  absl::StatusOr<std::string> GetNamedState(const NamedStateKey& key) override;
  absl::Status DeleteNamedState(const NamedStateKey& key) override;
  absl::StatusOr<std::vector<NamedStateListing>> ListNamedStates(
      const std::string& tenant) override;

  // The file that holds `key` (tests and tools), and the source's file a
  // fork stored by reference holds beside it.
  std::string PathOf(const StoredSessionKey& key) const;
  std::string BasePathOf(const StoredSessionKey& key) const;
  // The file that holds the named state `key` with `digest`, and the
  // directory of its tenant's named states (tests and tools).
  std::string NamedPathOf(const NamedStateKey& key, const std::string& digest) const;
  std::string NamedDirOf(const std::string& tenant) const;
  // Bytes of the state files held now.
  int64_t bytes() const;
  // Temporaries of interrupted writes that Open removed (the server logs it).
  int stale_temp_files_removed() const { return stale_temp_files_removed_; }

 private:
  DiskStateStore(std::string dir, int64_t max_bytes, int stale_temp_files_removed)
      : dir_(std::move(dir)),
        max_bytes_(max_bytes),
        stale_temp_files_removed_(stale_temp_files_removed) {}
  absl::Status Full(int64_t needed) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `size` bytes of the budget before they are written, so that two
  // writers cannot both take the last bytes (RESOURCE_EXHAUSTED when they
  // do not fit); Release gives them back.
  absl::Status Reserve(int64_t size);
  void Release(int64_t size);

  const std::string dir_;
  const int64_t max_bytes_;
  const int stale_temp_files_removed_;
  // Held across a named state's Put or Delete (list, write or remove), so
  // that two Puts of one name cannot both find it free. Taken before mu_.
  absl::Mutex named_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes of each file by name: what a replacing Put or a Delete frees.
  absl::flat_hash_map<std::string, int64_t> sizes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_DISK_STATE_STORE_H_
