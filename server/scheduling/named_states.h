#ifndef LINSERVE_SERVER_NAMED_STATES_H_
#define LINSERVE_SERVER_NAMED_STATES_H_

// Named states: a state of the served model under a name, read-only once
// made, that turns and sessions start from instead of a fresh state (a
// state-tuned persona, a long system prompt prefilled once for all time).
//
// Two kinds of names:
//   - the server's own, read at start from --states_dir (every tenant's,
//     read-only, their names reserved, always restored in memory);
//   - tenants', in the state store's key space for them (disk or Redis:
//     every replica finds them), restored into a bounded cache on first use.
//     With a store several servers share, every use asks the store's index
//     for the name's digest first, so a state deleted or made again on
//     another replica is never served stale.
//
// A named state is never advanced: whoever starts from it takes a copy.
// Its content digest (SHA-256 of the state's tensors, position and pending
// token) scopes the prefix-state cache for turns that start from it.
//
// Engine thread only, but for the store calls it runs on the session
// manager's store worker; their answers come back as engine-thread tasks.
// Brings in LibTorch (it holds States): only the scheduler's files include it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/model/state.h"
#include "server/common/metrics.h"
#include "server/scheduling/scheduler.h"
#include "server/scheduling/session_manager.h"

namespace linserve {

class LanguageModel;

// One named state, restored.
struct NamedState {
  NamedStateInfo info;
  std::string tenant;         // "" for the server's own
  int64_t pending_token = -1;  // fed before a turn's own text (an exported session's)
  State state;                // never advanced: turns work on a copy
};

// SHA-256 (hex) of what a turn starting from a state depends on: the
// serialized tensors, the position and the pending token.
std::string NamedStateDigest(std::string_view payload, int64_t position, int64_t pending_token);

class NamedStates {
 public:
  using Found = std::function<void(absl::StatusOr<std::shared_ptr<const NamedState>>)>;
  template <typename T>
  using Done = Scheduler::Done<T>;

  NamedStates(const LanguageModel& model, std::string fingerprint, SessionManager& sessions,
              Metrics* metrics, const SchedulerOptions& options);

  // Reads the server's own states from `dir` (every regular file; its name
  // without the extension names the state). Before the engine thread runs;
  // an unreadable file fails the start, naming it.
  absl::Status LoadGlobal(const std::string& dir);
  std::vector<NamedStateInfo> GlobalInfos() const;

  // The state `name` means to `tenant`: the server's own, or the tenant's.
  // NOT_FOUND (naming `field`) when neither has it. `then` runs on the engine
  // thread, at once when the store need not answer.
  void Find(const std::string& tenant, const std::string& name, const char* field, Found then);
  // Counts a turn or session started from `state` (the uses metric).
  void CountUse(const NamedState& state);

  // OK when `tenant` may make `name` now: not the server's, not taken, and
  // the tenant below its count limit (checked again when it is stored).
  void CheckNew(const std::string& tenant, const std::string& name,
                std::function<void(absl::Status)> then);
  // Stores `state` (consumed; position from the state) as the tenant's new
  // named state. `cost` carries the source and what making it cost; the
  // answer is it completed. `payload`, when given, is bytes that restore to
  // `state`, saved instead of serializing it again.
  void Add(const std::string& tenant, const std::string& name, State state, int64_t pending_token,
           NamedStateInfo cost, std::optional<std::string> payload, Done<NamedStateInfo> done);
  // An upload: a linserve state file (an exported session), an RWKV-PEFT
  // .pth or an ai00 .state, checked whole, then Add.
  void Upload(const std::string& tenant, const std::string& name, const std::string& bytes,
              Done<NamedStateInfo> done);
  void Get(const std::string& tenant, const std::string& name, Done<NamedStateInfo> done);
  void List(const std::string& tenant, Done<std::vector<NamedStateInfo>> done);
  void Delete(const std::string& tenant, const std::string& name, Done<bool> done);

 private:
  using Shared = std::shared_ptr<const NamedState>;
  // Reads the tenant's state from the store (the cache's copy when its
  // digest is `digest`) and restores it.
  void Fetch(const std::string& tenant, const std::string& name, const char* field,
             const std::string& digest, Found then);
  // The state a stored file holds, checked against the model.
  absl::StatusOr<std::shared_ptr<NamedState>> Restore(const std::string& tenant,
                                                      const std::string& file) const;
  // The state of an uploaded file and where it came from ("state_file",
  // "rwkv_peft", "ai00"), with the payload to save when it came as one.
  struct Parsed {
    State state;
    int64_t pending_token = -1;
    std::string source;
    std::optional<std::string> payload;
  };
  absl::StatusOr<Parsed> Parse(const std::string& bytes) const;
  void Remember(Shared state);
  void Forget(const std::string& tenant, const std::string& name);
  // The cache's copy (now the most recently used), or null.
  Shared Cached(const std::string& tenant, const std::string& name);
  void UpdateGauges();
  // Several servers write the store (Redis): the cache may be stale.
  bool StoreIsShared() const;

  const LanguageModel& model_;
  const std::string fingerprint_;
  SessionManager& sessions_;
  Metrics* const metrics_;
  const SchedulerOptions options_;
  absl::flat_hash_map<std::string, Shared> global_;
  // Tenants' states by tenant, NUL, name; the oldest used goes first past
  // named_state_cache_bytes.
  struct Entry {
    Shared state;
    uint64_t last_used = 0;
  };
  absl::flat_hash_map<std::string, Entry> cache_;
  int64_t cache_bytes_ = 0;
  uint64_t uses_ = 0;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_NAMED_STATES_H_
