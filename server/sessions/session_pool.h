#ifndef LINSERVE_SERVER_SESSION_POOL_H_
#define LINSERVE_SERVER_SESSION_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/generation/sampler.h"
#include "server/store/state_file.h"
#include "server/store/state_store.h"

namespace linserve {

struct State;  // engine/model/state.h; kept out of this header (LibTorch)

// A state a session kept at a point of its conversation
// (GenerateRequest.keep_state_at), to go back to when a later turn's
// conversation differs after it.
struct KeptState {
  int64_t position = 0;
  // engine/model/state.h's KeepFixedPart: the whole of a constant state, a
  // hybrid's recurrent part (its KV cache up to `position` is the session's
  // own). Never changed once kept, so forks share it.
  std::shared_ptr<const State> state;
};

// One conversation held by the server.
struct Session {
  Session();
  ~Session();

  std::string tenant;  // owner; empty when auth is off
  std::string id;
  int64_t position = 0;       // tokens the state has consumed
  int64_t pending_token = -1;  // sampled last turn, fed first next turn; -1: none
  // Made from a named state: its content digest, the prefix-cache scope of
  // the first turn (a state-tuned one stands at position 0 yet is not fresh).
  std::string origin;
  SamplerRngState rng;         // where the last turn's sampler stopped
  int64_t created_unix_ms = 0;
  int64_t last_used_unix_ms = 0;
  // The state after the last finished turn; null while it is only in the
  // store. Never written: a turn advances its own copy (CloneState) and
  // replaces this at its end, so that other states (a fork's) may share its
  // tensors.
  std::unique_ptr<State> state;
  // The tokens the state consumed, in order (position of them), while they
  // are known: in memory with the state, in the state file with it (a
  // version 1 file, or a session made from a named state, does not know
  // them). A conversation turn (GenerateRequest.conversation) compares them
  // with what it is sent.
  std::vector<int32_t> tokens;
  bool tokens_known = true;
  // States kept at points of its conversation, oldest first, each at most
  // `position`. They go when the state leaves memory.
  std::vector<KeptState> kept;
  // Its chat messages: in memory while the session is known (a state's
  // spill keeps them: they are small beside it), and in its state file.
  SessionChat chat;
  bool busy = false;       // a turn (Generate or a CreateSession prefill) runs on it
  int pending_writes = 0;  // checkpoints queued and not yet durable
  // With a store several servers share: the store version this copy
  // matches once its queued checkpoints land (0: never stored; -1: unknown,
  // so read the store again before using it).
  int64_t store_version = 0;
  uint64_t last_touch = 0;  // LRU order of memory residency

  StoredSessionKey key() const { return {tenant, id}; }
};

// Bounds on the bytes of the session states held in memory. A constant
// state costs the same at every position; a growing one (a KV cache) costs
// `state_bytes(position)`, so a hybrid's sessions weigh by their length.
struct SessionMemoryBounds {
  int64_t max_bytes = 0;             // all sessions; 0: no bound
  int64_t max_bytes_per_tenant = 0;  // one authenticated tenant's; 0: no quota
  std::function<int64_t(int64_t position)> state_bytes;  // null: the bounds are off
  // Bytes a set of states holds in memory, a tensor or KV block shared
  // between them
  // counted once (engine/model/state.h's MeasureResidentStates). Null: each
  // state counts state_bytes(position), each kept one state_bytes(0).
  std::function<int64_t(const std::vector<const State*>&)> resident_bytes;
};

// Every session the server knows, in memory or only in the store, with LRU
// order for spilling. Not thread-safe: the engine thread owns it.
class SessionPool {
 public:
  // `max_sessions` bounds all sessions, `max_in_memory` those with a state
  // in memory, `max_per_tenant` those one authenticated tenant may make
  // (0: no quota). The "" tenant (auth off) has no quota: without tokens
  // every client is that tenant, so its quota would only be a second
  // max_sessions.
  SessionPool(int64_t max_sessions, int64_t max_in_memory, int64_t max_per_tenant = 0,
              SessionMemoryBounds memory = {});

  // NOT_FOUND for an unknown id and for another tenant's: the two must be
  // indistinguishable.
  absl::StatusOr<Session*> Find(const std::string& tenant, const std::string& id);
  // Any tenant's session, or null (the server's own bookkeeping).
  Session* FindById(const std::string& id);
  // A new empty session with a fresh id; RESOURCE_EXHAUSTED at max_sessions
  // or at the tenant's quota.
  absl::StatusOr<Session*> Add(const std::string& tenant, int64_t now_unix_ms);
  // A session read back from the store (its state stays there). It counts
  // towards its tenant's quota but is not refused by it: it exists already.
  absl::Status AddStored(std::unique_ptr<Session> session);
  void Remove(const std::string& id);

  // Marks `session` most recently used.
  void Touch(Session* session);
  // Frees memory for `keep`'s state (at its position) by dropping the least
  // recently used idle states whose checkpoints are durable (they are
  // already in the store), until one more fits max_in_memory and its bytes
  // fit the bounds. RESOURCE_EXHAUSTED, naming the bound, when the state
  // alone is larger than a byte bound, or when every state that could go is
  // busy or being written.
  absl::Status MakeRoom(const Session* keep);
  // After `keep`'s state grew (a turn ended): drops the least recently used
  // idle durable states until the byte bounds hold again, as far as idle
  // ones allow.
  void Trim(const Session* keep);

  // Bytes of the states in memory: all, and one tenant's.
  int64_t ResidentBytes() const;
  int64_t ResidentBytesOf(const std::string& tenant) const;
  const SessionMemoryBounds& memory_bounds() const { return memory_; }
  // Bytes of one session's resident state, the states it kept and its tokens
  // (blocks it shares with other sessions counted in full).
  int64_t BytesOf(const Session& session) const;
  // The states in memory (sessions' and those they kept), each once.
  std::vector<const State*> ResidentStates() const;

  // The tenant's sessions, oldest first (ties by id).
  std::vector<const Session*> ListOf(const std::string& tenant) const;
  // Sessions idle (not busy, nothing being written) since before `cutoff`.
  std::vector<std::string> IdleSince(int64_t cutoff_unix_ms) const;

  int64_t size() const { return static_cast<int64_t>(sessions_.size()); }
  int64_t in_memory() const;
  int64_t max_sessions() const { return max_sessions_; }
  int64_t CountOf(const std::string& tenant) const;

 private:
  const int64_t max_sessions_;
  const int64_t max_in_memory_;
  const int64_t max_per_tenant_;
  const SessionMemoryBounds memory_;
  // The least recently used state that may go (idle, durable, not `keep`;
  // of `tenant` unless it is null), or null.
  Session* SpillCandidate(const Session* keep, const std::string* tenant) const;
  // Drops a durable session's state from memory, with what goes with it.
  static void Spill(Session& session);
  // Bytes of the states in memory of `tenant`'s sessions (all when null),
  // shared blocks once, and their tokens.
  int64_t BytesOfSessions(const std::string* tenant) const;
  // The byte bound `keep`'s tenant is over with `extra` more bytes, as its
  // flag's name and value; empty when none.
  std::string ByteBoundCrossed(const Session* keep, int64_t extra, int64_t* bound) const;
  uint64_t clock_ = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Session>> sessions_;
  absl::flat_hash_map<std::string, int64_t> per_tenant_;  // sessions by tenant
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_POOL_H_
