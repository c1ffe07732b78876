#ifndef LINSERVE_SERVER_STATE_STORE_H_
#define LINSERVE_SERVER_STATE_STORE_H_

// Where sessions' state files live beyond memory: a directory (DiskStateStore)
// or, for several replicas, Redis. Keys are derived from (tenant, session id)
// by the store; no client string ever becomes a path or a key by itself.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve {

struct StoredSessionKey {
  std::string tenant;
  std::string session_id;
};

// What makes a write safe when several servers share a store: it lands only
// if the stored entry is still the version the writer last saw (0: no entry
// yet) and, when `lease_owner` is set, the writer still holds the session's
// lease. Otherwise the store answers ABORTED and writes nothing, so a server
// with a stale copy never overwrites a newer turn, and a deleted session is
// never brought back.
struct WriteFence {
  int64_t expected_version = 0;  // -1: any (an unfenced write)
  std::string lease_owner;
};

// A stored state file with the version the store gave it (every write bumps
// it by one; stores without versions say 0).
struct VersionedStateFile {
  std::string file;
  int64_t version = 0;
};

class SessionLeases;

// The name a store files `key` under: the SHA-256 (hex) of tenant, NUL and
// session id, so that no client string becomes a path or key by itself and
// ("ab", "c") and ("a", "bc") stay apart.
std::string StoredSessionName(const StoredSessionKey& key);

class StateStore {
 public:
  virtual ~StateStore() = default;

  // Replaces the session's state file as a whole (never torn).
  virtual absl::Status Put(const StoredSessionKey& key, const std::string& state_file) = 0;
  // NOT_FOUND when the store has no such session.
  virtual absl::StatusOr<std::string> Get(const StoredSessionKey& key) = 0;
  // OK whether or not it existed.
  virtual absl::Status Delete(const StoredSessionKey& key) = 0;
  // Every stored state file's bytes (what a starting server reads back).
  virtual absl::StatusOr<std::vector<std::string>> LoadAll() = 0;
  // RESOURCE_EXHAUSTED, naming the limit, when `more_bytes` of new state
  // files would not fit (checked before a new session is made, so that it
  // is refused before any work). A store without a byte budget of its own
  // (Redis has maxmemory) always has room.
  virtual absl::Status CheckRoom(int64_t /*more_bytes*/) const { return absl::OkStatus(); }

  // Versions, fences and leases matter only where several servers share the
  // store; the defaults are for a store one server owns (a directory): no
  // versions, fences always pass, no leases.

  // Put under `fence`; returns the entry's new version.
  virtual absl::StatusOr<int64_t> PutFenced(const StoredSessionKey& key,
                                            const std::string& state_file,
                                            const WriteFence& fence);
  // Get with the entry's version.
  virtual absl::StatusOr<VersionedStateFile> GetVersioned(const StoredSessionKey& key);
  // The entry's version alone (0: no entry), cheaper than reading the state.
  virtual absl::StatusOr<int64_t> VersionOf(const StoredSessionKey& key);
  // Non-null when several servers may share this store: they then take a
  // session's lease before advancing it.
  virtual SessionLeases* leases() { return nullptr; }
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STATE_STORE_H_
