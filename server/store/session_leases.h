#ifndef LINSERVE_SERVER_SESSION_LEASES_H_
#define LINSERVE_SERVER_SESSION_LEASES_H_

// Per-session leases for servers that share one store: a server takes a
// session's lease before a turn advances it, renews it while the turn runs and
// lets it go once the turn is durable, so two servers never advance one
// session at once. A lease expires by itself (a server killed mid-turn holds
// it only until then), and every write is fenced by it (WriteFence), so a
// server that lost its lease cannot overwrite the new holder's turns.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/store/state_store.h"

namespace linserve {

class SessionLeases {
 public:
  virtual ~SessionLeases() = default;

  // Takes the lease for `owner` (or extends it when `owner` holds it
  // already) for `ttl`. ABORTED when another owner holds it.
  virtual absl::Status AcquireLease(const StoredSessionKey& key, const std::string& owner,
                                    absl::Duration ttl) = 0;
  // Extends `owner`'s lease to `ttl` from now. ABORTED when it was lost
  // (expired, and maybe taken by another owner).
  virtual absl::Status RenewLease(const StoredSessionKey& key, const std::string& owner,
                                  absl::Duration ttl) = 0;
  // Gives the lease up if `owner` still holds it; OK either way.
  virtual absl::Status ReleaseLease(const StoredSessionKey& key, const std::string& owner) = 0;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_LEASES_H_
