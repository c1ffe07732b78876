#ifndef LINSERVE_SERVER_DISK_STATE_STORE_H_
#define LINSERVE_SERVER_DISK_STATE_STORE_H_

#include <memory>
#include <string>

#include "server/state_store.h"

namespace linserve {

// State files in one directory, named by the SHA-256 of (tenant, session id),
// written atomically (server/atomic_file.h). Thread-safe: every call touches
// one file, and the rename is atomic.
class DiskStateStore : public StateStore {
 public:
  // Creates `dir` if needed and removes temporaries a crash left there.
  static absl::StatusOr<std::unique_ptr<DiskStateStore>> Open(const std::string& dir);

  absl::Status Put(const StoredSessionKey& key, const std::string& state_file) override;
  absl::StatusOr<std::string> Get(const StoredSessionKey& key) override;
  absl::Status Delete(const StoredSessionKey& key) override;
  absl::StatusOr<std::vector<std::string>> LoadAll() override;

  // The file that holds `key` (tests and tools).
  std::string PathOf(const StoredSessionKey& key) const;
  // Temporaries of interrupted writes that Open removed (the server logs it).
  int stale_temp_files_removed() const { return stale_temp_files_removed_; }

 private:
  DiskStateStore(std::string dir, int stale_temp_files_removed)
      : dir_(std::move(dir)), stale_temp_files_removed_(stale_temp_files_removed) {}
  const std::string dir_;
  const int stale_temp_files_removed_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_DISK_STATE_STORE_H_
