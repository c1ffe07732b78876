#ifndef LINSERVE_SERVER_REDIS_STATE_STORE_H_
#define LINSERVE_SERVER_REDIS_STATE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/session_leases.h"
#include "server/store/state_store.h"

struct redisContext;
struct redisReply;

namespace linserve {

// Where a Redis store lives: redis://HOST:PORT[/DB][?prefix=NAME].
struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string prefix = "linserve";
};

// The error names the URL and what is wrong with it.
absl::StatusOr<RedisAddress> ParseRedisUrl(const std::string& url);

// Sessions' state files in Redis (hiredis), so that several replicas share
// them. Per session, named by StoredSessionName:
//   <prefix>:session:<name>  the state file bytes (as the disk store's files)
//   <prefix>:version:<name>  its version, bumped by every write
//   <prefix>:lease:<name>    the owner of the session's lease, if any
// State and version expire together `ttl` after the last write (zero:
// never). Named states, per tenant, never expire:
//   <prefix>:named:<SHA-256 hex of tenant>  a hash: name -> "<digest> <bytes>"
//   <prefix>:named-state:<StoredSessionName of (tenant, name)>  the state file
// (LoadAll's SCAN of <prefix>:session:* never meets them). Writes and lease changes are Lua scripts, so each is atomic in
// Redis. Errors: Redis unreachable or failing is UNAVAILABLE, out of memory
// RESOURCE_EXHAUSTED, a failed fence or lease ABORTED; the next call
// reconnects, so the store recovers by itself when Redis returns.
// Thread-safe (one connection behind a mutex).
class RedisStateStore : public StateStore, public SessionLeases {
 public:
  static absl::StatusOr<std::unique_ptr<RedisStateStore>> Open(const RedisAddress& address,
                                                               absl::Duration ttl,
                                                               absl::Duration timeout);
  ~RedisStateStore() override;

  absl::Status Put(const StoredSessionKey& key, const std::string& state_file) override;
  absl::StatusOr<std::string> Get(const StoredSessionKey& key) override;
  absl::Status Delete(const StoredSessionKey& key) override;
  absl::StatusOr<std::vector<std::string>> LoadAll() override;
  absl::StatusOr<int64_t> PutFenced(const StoredSessionKey& key, const std::string& state_file,
                                    const WriteFence& fence) override;
  absl::StatusOr<VersionedStateFile> GetVersioned(const StoredSessionKey& key) override;
  absl::StatusOr<int64_t> VersionOf(const StoredSessionKey& key) override;
  SessionLeases* leases() override { return this; }

  absl::Status PutNamedState(const NamedStateKey& key, const std::string& digest,
                             const std::string& state_file) override;
  absl::StatusOr<NamedStateListing> FindNamedState(const NamedStateKey& key) override;
  absl::StatusOr<std::string> GetNamedState(const NamedStateKey& key) override;
  absl::Status DeleteNamedState(const NamedStateKey& key) override;
  absl::StatusOr<std::vector<NamedStateListing>> ListNamedStates(
      const std::string& tenant) override;

  absl::Status AcquireLease(const StoredSessionKey& key, const std::string& owner,
                            absl::Duration ttl) override;
  absl::Status RenewLease(const StoredSessionKey& key, const std::string& owner,
                          absl::Duration ttl) override;
  absl::Status ReleaseLease(const StoredSessionKey& key, const std::string& owner) override;

  // The Redis keys of a session (tests and tools).
  std::string KeyOf(const StoredSessionKey& key) const;
  std::string VersionKeyOf(const StoredSessionKey& key) const;
  std::string LeaseKeyOf(const StoredSessionKey& key) const;
  // The Redis keys of a tenant's named-state index and of one named state's
  // file (tests and tools).
  std::string NamedIndexKeyOf(const std::string& tenant) const;
  std::string NamedKeyOf(const NamedStateKey& key) const;

 private:
  RedisStateStore(RedisAddress address, absl::Duration ttl, absl::Duration timeout);
  // Connects if there is no live connection.
  absl::Status Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct ReplyDeleter {
    void operator()(redisReply* reply) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  // Runs one command (argv form, binary-safe). An error reply is a status.
  absl::StatusOr<Reply> Run(const std::vector<std::string>& argv);
  // Runs a Lua script whose reply is an integer.
  absl::StatusOr<long long> RunScript(const char* script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args);

  const RedisAddress address_;
  const absl::Duration ttl_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  redisContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_REDIS_STATE_STORE_H_
