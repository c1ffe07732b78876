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
struct SessionRecord;  // server/store/state_file.h

// A named state's place in the store (server/sessions/named_states.h): per
// tenant, under a name the server has checked ([A-Za-z0-9._-], 1 to 64
// characters) before it reaches the store.
struct NamedStateKey {
  std::string tenant;
  std::string name;
};

// What the store's index says of one named state, without reading it.
struct NamedStateListing {
  std::string name;
  std::string digest;  // 64 hex digits: the state's content digest (NamedStateDigest)
  int64_t bytes = 0;   // of its state file
};

// OK when `digest` is what NamedStateListing::digest holds (64 hex digits);
// else INVALID_ARGUMENT naming it. The stores check it before it becomes part
// of a file name or an index entry.
absl::Status CheckNamedStateDigest(const std::string& digest);

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

  // Forks by reference: a store that can hold `fork`'s entry as `source`'s
  // current state file with the fork's own header fields (tenant, session
  // id, created and last-used times, from `header`) without copying the
  // state says so here, and PutFork then stores it; afterwards Get(fork) and
  // LoadAll give what Put of the fork's whole file would have. The caller
  // makes sure that `source`'s stored file is its state now (no write of it
  // queued or lost). The defaults: no (the caller writes the whole file).
  virtual bool StoresForksByReference() const { return false; }
  virtual absl::Status PutFork(const StoredSessionKey& fork, const StoredSessionKey& source,
                               const SessionRecord& header);

  // Named states: a key space of their own beside sessions'. They never
  // expire, LoadAll does not return them, and their bytes count against the
  // store's budget (--max_store_bytes) like sessions'. An entry is never
  // replaced: a name is made once, then only read or deleted. The defaults
  // answer UNIMPLEMENTED (a store that cannot hold them).

  // Stores a new named state: ALREADY_EXISTS when the tenant has one of that
  // name (nothing is written), RESOURCE_EXHAUSTED when the store is full.
  // Atomic: a reader sees the whole entry or none.
  virtual absl::Status PutNamedState(const NamedStateKey& key, const std::string& digest,
                                     const std::string& state_file);
  // Its listing (cheap: no state bytes read), NOT_FOUND when there is none.
  virtual absl::StatusOr<NamedStateListing> FindNamedState(const NamedStateKey& key);
  // Its state file, NOT_FOUND when there is none.
  virtual absl::StatusOr<std::string> GetNamedState(const NamedStateKey& key);
  // NOT_FOUND when there was none.
  virtual absl::Status DeleteNamedState(const NamedStateKey& key);
  // The tenant's named states, by name.
  virtual absl::StatusOr<std::vector<NamedStateListing>> ListNamedStates(
      const std::string& tenant);
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STATE_STORE_H_
