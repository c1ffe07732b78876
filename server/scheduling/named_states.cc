#include "server/scheduling/named_states.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/base/sha256.h"
#include "engine/base/status_macros.h"
#include "engine/model/language_model.h"
#include "server/common/log.h"
#include "server/requests/request_validation.h"
#include "server/sessions/state_restore.h"
#include "server/store/atomic_file.h"
#include "server/store/state_file.h"

namespace linserve {
namespace {

std::string CacheKey(const std::string& tenant, const std::string& name) {
  return absl::StrCat(tenant, absl::string_view("\0", 1), name);
}

absl::Status NotFound(const char* field, const std::string& name) {
  return absl::NotFoundError(
      absl::StrCat(field, " \"", name, "\" is not a named state of yours or the server's"));
}

// What the client hears when the store failed: its own RESOURCE_EXHAUSTED,
// ALREADY_EXISTS and NOT_FOUND stay, anything else is UNAVAILABLE.
absl::Status StoreError(const absl::Status& status) {
  if (absl::IsResourceExhausted(status) || absl::IsAlreadyExists(status) ||
      absl::IsNotFound(status) || absl::IsInvalidArgument(status)) {
    return status;
  }
  return absl::UnavailableError(absl::StrCat("the state store: ", status.message()));
}

bool IsStateFile(const std::string& bytes) { return absl::StartsWith(bytes, "LNSVSTAT"); }

// A zip is a .pth (RWKV-PEFT); anything else is taken for safetensors (ai00).
bool IsZip(const std::string& bytes) { return absl::StartsWith(bytes, "PK\x03\x04"); }

}  // namespace

std::string NamedStateDigest(std::string_view payload, int64_t position, int64_t pending_token) {
  const std::string where = absl::StrCat(":", position, ":", pending_token);
  return Sha256Hex({"linserve named state v1", where, payload});
}

NamedStates::NamedStates(const LanguageModel& model, std::string fingerprint,
                         SessionManager& sessions, Metrics* metrics,
                         const SchedulerOptions& options)
    : model_(model),
      fingerprint_(std::move(fingerprint)),
      sessions_(sessions),
      metrics_(metrics),
      options_(options) {}

bool NamedStates::StoreIsShared() const { return sessions_.store().leases() != nullptr; }

absl::Status NamedStates::LoadGlobal(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (error) return absl::NotFoundError(absl::StrCat("--states_dir ", dir, ": ", error.message()));
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& path : files) {
    const std::string name = path.stem().string();
    auto failed = [&path](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat("--states_dir file ", path.string(), ": ",
                                                      status.message()));
    };
    if (absl::Status valid = ValidateStateName("its name", name); !valid.ok()) {
      return failed(valid);
    }
    if (global_.contains(name)) {
      return failed(absl::AlreadyExistsError(absl::StrCat("another file is also named ", name)));
    }
    // Bounded before it is read: a stray large file must not be loaded whole.
    const std::uintmax_t size = std::filesystem::file_size(path, error);
    if (error) return failed(absl::NotFoundError(error.message()));
    if (size > static_cast<std::uintmax_t>(options_.max_state_bytes)) {
      return failed(absl::InvalidArgumentError(absl::StrCat(
          size, " bytes is larger than max_state_bytes = ", options_.max_state_bytes)));
    }
    absl::StatusOr<std::string> bytes = ReadFile(path.string());
    if (!bytes.ok()) return failed(bytes.status());
    absl::StatusOr<Parsed> parsed = Parse(*bytes);
    if (!parsed.ok()) return failed(parsed.status());
    auto state = std::make_shared<NamedState>();
    SessionRecord record;
    record.model_fingerprint = fingerprint_;
    record.session_id = name;
    record.position = parsed->state.positions[0];
    record.pending_token = parsed->pending_token;
    record.source = parsed->source;
    record.payload = parsed->payload ? *parsed->payload : model_.SerializeState(parsed->state);
    state->info.name = name;
    state->info.global = true;
    state->info.digest =
        NamedStateDigest(record.payload, record.position, record.pending_token);
    state->info.state_bytes = static_cast<int64_t>(EncodeStateFile(record).size());
    state->info.position = record.position;
    state->info.source = record.source;
    state->pending_token = record.pending_token;
    state->state = std::move(parsed->state);
    LogInfo("named_state_loaded", {{"name", name},
                                   {"source", state->info.source},
                                   {"position", state->info.position},
                                   {"digest", state->info.digest}});
    global_.emplace(name, std::move(state));
  }
  UpdateGauges();
  return absl::OkStatus();
}

std::vector<NamedStateInfo> NamedStates::GlobalInfos() const {
  std::vector<NamedStateInfo> infos;
  for (const auto& [name, state] : global_) infos.push_back(state->info);
  std::sort(infos.begin(), infos.end(),
            [](const NamedStateInfo& a, const NamedStateInfo& b) { return a.name < b.name; });
  return infos;
}

void NamedStates::Find(const std::string& tenant, const std::string& name, const char* field,
                       Found then) {
  auto global = global_.find(name);
  if (global != global_.end()) return then(global->second);
  if (!StoreIsShared()) {
    // This server is the store's only writer: its cache is never stale.
    if (Shared cached = Cached(tenant, name)) return then(cached);
    return Fetch(tenant, name, field, "", std::move(then));
  }
  // Another replica may have deleted the name or made it again: its index
  // says which state the name means now.
  sessions_.RunOnStoreWorker([this, tenant, name, field, then = std::move(then)] {
    absl::StatusOr<NamedStateListing> listing =
        sessions_.store().FindNamedState({tenant, name});
    sessions_.post()([this, tenant, name, field, then, listing = std::move(listing)] {
      if (!listing.ok()) {
        Forget(tenant, name);
        return then(absl::IsNotFound(listing.status()) ? NotFound(field, name)
                                                        : StoreError(listing.status()));
      }
      Shared cached = Cached(tenant, name);
      if (cached != nullptr && cached->info.digest == listing->digest) return then(cached);
      Fetch(tenant, name, field, listing->digest, then);
    });
  });
}

void NamedStates::Fetch(const std::string& tenant, const std::string& name, const char* field,
                        const std::string& digest, Found then) {
  sessions_.RunOnStoreWorker([this, tenant, name, field, digest, then = std::move(then)] {
    absl::StatusOr<std::string> file = sessions_.store().GetNamedState({tenant, name});
    sessions_.post()([this, tenant, name, field, digest, then, file = std::move(file)] {
      if (!file.ok()) {
        return then(absl::IsNotFound(file.status()) ? NotFound(field, name)
                                                     : StoreError(file.status()));
      }
      absl::StatusOr<std::shared_ptr<NamedState>> restored = Restore(tenant, *file);
      if (!restored.ok()) {
        LogError("named_state_unreadable", {{"error", restored.status().ToString()}});
        return then(absl::DataLossError(absl::StrCat(
            field, " \"", name, "\": the stored state is unreadable: ",
            restored.status().message())));
      }
      // A digest other than the index's: the name was made again between
      // the two reads. What was read is whole and checked, and it is what
      // the name means now.
      if (!digest.empty() && (*restored)->info.digest != digest) {
        LogInfo("named_state_changed", {{"digest", (*restored)->info.digest}});
      }
      Shared state = *std::move(restored);
      Remember(state);
      then(state);
    });
  });
}

absl::StatusOr<std::shared_ptr<NamedState>> NamedStates::Restore(const std::string& tenant,
                                                                 const std::string& file) const {
  const int64_t max_bytes = std::max(options_.max_state_bytes, options_.max_state_upload_bytes);
  LINSERVE_ASSIGN_OR_RETURN(SessionRecord record,
                            DecodeStateFileOfModel(file, max_bytes, fingerprint_));
  if (record.tenant != tenant) {
    return absl::DataLossError("the state file belongs to another tenant");
  }
  LINSERVE_ASSIGN_OR_RETURN(State state, RestoreState(record, model_));
  auto named = std::make_shared<NamedState>();
  named->info.name = record.session_id;
  named->info.digest = NamedStateDigest(record.payload, record.position, record.pending_token);
  named->info.state_bytes = static_cast<int64_t>(file.size());
  named->info.position = record.position;
  named->info.created_unix_ms = record.created_unix_ms;
  named->info.source = record.source;
  named->tenant = tenant;
  named->pending_token = record.pending_token;
  named->state = std::move(state);
  return named;
}

absl::StatusOr<NamedStates::Parsed> NamedStates::Parse(const std::string& bytes) const {
  Parsed parsed;
  if (IsStateFile(bytes)) {
    const int64_t max_bytes = std::max(options_.max_state_bytes, options_.max_state_upload_bytes);
    absl::StatusOr<SessionRecord> record = DecodeStateFileOfModel(bytes, max_bytes, fingerprint_);
    if (!record.ok()) {
      return absl::Status(record.status().code(),
                          absl::StrCat("the linserve state file: ", record.status().message()));
    }
    absl::StatusOr<State> state = RestoreState(*record, model_);
    if (!state.ok()) {
      return absl::DataLossError(
          absl::StrCat("the linserve state file: ", state.status().message()));
    }
    parsed.state = *std::move(state);
    parsed.pending_token = record->pending_token;
    parsed.source = "state_file";
    parsed.payload = std::move(record->payload);
    return parsed;
  }
  absl::StatusOr<State> state = model_.StateFromTuningFile(bytes);
  if (!state.ok()) {
    return absl::Status(
        absl::IsUnimplemented(state.status()) ? absl::StatusCode::kInvalidArgument
                                              : state.status().code(),
        absl::StrCat("the state-tuning file (a linserve state file starts with LNSVSTAT): ",
                     state.status().message()));
  }
  parsed.state = *std::move(state);
  parsed.source = IsZip(bytes) ? "rwkv_peft" : "ai00";
  return parsed;
}

void NamedStates::CountUse(const NamedState& state) {
  metrics_->CountNamedStateUse(state.info.global ? state.info.name : "");
}

void NamedStates::CheckNew(const std::string& tenant, const std::string& name,
                           std::function<void(absl::Status)> then) {
  if (global_.contains(name)) {
    return then(absl::AlreadyExistsError(absl::StrCat(
        "name \"", name, "\" is the server's own named state (reserved); pick another")));
  }
  sessions_.RunOnStoreWorker([this, tenant, name, then = std::move(then)] {
    absl::StatusOr<std::vector<NamedStateListing>> mine =
        sessions_.store().ListNamedStates(tenant);
    absl::Status verdict = mine.status();
    if (mine.ok()) {
      const bool taken = std::any_of(mine->begin(), mine->end(),
                                     [&](const NamedStateListing& l) { return l.name == name; });
      if (taken) {
        verdict = absl::AlreadyExistsError(absl::StrCat(
            "name \"", name, "\" is taken: named states are read-only; delete it first"));
      } else if (static_cast<int64_t>(mine->size()) >= options_.max_named_states_per_tenant) {
        metrics_->CountRejection("named_state_limit");
        verdict = absl::ResourceExhaustedError(absl::StrCat(
            "you hold ", mine->size(), " named states; max_named_states_per_tenant = ",
            options_.max_named_states_per_tenant, ": delete one first"));
      }
    } else {
      verdict = StoreError(verdict);
    }
    sessions_.post()([then, verdict] { then(verdict); });
  });
}

void NamedStates::Add(const std::string& tenant, const std::string& name, State state,
                      int64_t pending_token, NamedStateInfo cost,
                      std::optional<std::string> payload, Done<NamedStateInfo> done) {
  if (global_.contains(name)) {
    return done(absl::AlreadyExistsError(absl::StrCat(
        "name \"", name, "\" is the server's own named state (reserved); pick another")));
  }
  SessionRecord record;
  record.model_fingerprint = fingerprint_;
  record.tenant = tenant;
  record.session_id = name;
  record.position = state.positions[0];
  record.pending_token = pending_token;
  record.created_unix_ms = sessions_.NowUnixMs();
  record.last_used_unix_ms = record.created_unix_ms;
  record.source = cost.source;
  record.payload = payload ? *std::move(payload) : model_.SerializeState(state);
  auto named = std::make_shared<NamedState>();
  named->info = std::move(cost);
  named->info.name = name;
  named->info.global = false;
  named->info.digest = NamedStateDigest(record.payload, record.position, record.pending_token);
  named->info.position = record.position;
  named->info.created_unix_ms = record.created_unix_ms;
  named->tenant = tenant;
  named->pending_token = pending_token;
  named->state = std::move(state);
  auto file = std::make_shared<const std::string>(EncodeStateFile(record));
  named->info.state_bytes = static_cast<int64_t>(file->size());
  sessions_.RunOnStoreWorker([this, named, file, done] {
    StateStore& store = sessions_.store();
    // The tenant's bounds, against the store every replica writes (two
    // replicas racing for the last place may both pass: the bound is
    // approximate by at most the replicas' number).
    absl::Status stored = absl::OkStatus();
    absl::StatusOr<std::vector<NamedStateListing>> mine = store.ListNamedStates(named->tenant);
    if (!mine.ok()) {
      stored = mine.status();
    } else {
      int64_t bytes = 0;
      for (const NamedStateListing& l : *mine) bytes += l.bytes;
      if (static_cast<int64_t>(mine->size()) >= options_.max_named_states_per_tenant) {
        stored = absl::ResourceExhaustedError(absl::StrCat(
            "you hold ", mine->size(), " named states; max_named_states_per_tenant = ",
            options_.max_named_states_per_tenant, ": delete one first"));
      } else if (bytes + named->info.state_bytes > options_.max_named_state_bytes_per_tenant) {
        stored = absl::ResourceExhaustedError(absl::StrCat(
            "your named states hold ", bytes, " bytes and this one ", named->info.state_bytes,
            " more would pass max_named_state_bytes_per_tenant = ",
            options_.max_named_state_bytes_per_tenant, ": delete one first"));
      }
    }
    if (stored.ok()) stored = store.PutNamedState({named->tenant, named->info.name},
                                                  named->info.digest, *file);
    sessions_.post()([this, named, done, stored] {
      if (!stored.ok()) {
        if (absl::IsResourceExhausted(stored)) metrics_->CountRejection("named_state_limit");
        if (absl::IsAlreadyExists(stored)) {
          return done(absl::AlreadyExistsError(
              absl::StrCat("name \"", named->info.name,
                           "\" is taken: named states are read-only; delete it first")));
        }
        return done(StoreError(stored));
      }
      Remember(named);
      LogInfo("named_state_made", {{"source", named->info.source},
                                   {"position", named->info.position},
                                   {"bytes", named->info.state_bytes}});
      done(named->info);
    });
  });
}

void NamedStates::Upload(const std::string& tenant, const std::string& name,
                         const std::string& bytes, Done<NamedStateInfo> done) {
  if (static_cast<int64_t>(bytes.size()) > options_.max_state_upload_bytes) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("the upload is ", bytes.size(), " bytes; max_state_upload_bytes = ",
                     options_.max_state_upload_bytes)));
  }
  absl::StatusOr<Parsed> parsed = Parse(bytes);
  if (!parsed.ok()) return done(parsed.status());
  NamedStateInfo cost;
  cost.source = parsed->source;
  Add(tenant, name, std::move(parsed->state), parsed->pending_token, std::move(cost),
      std::move(parsed->payload), std::move(done));
}

void NamedStates::Get(const std::string& tenant, const std::string& name,
                      Done<NamedStateInfo> done) {
  Find(tenant, name, "name", [done](absl::StatusOr<Shared> state) {
    if (!state.ok()) return done(state.status());
    done((*state)->info);
  });
}

void NamedStates::List(const std::string& tenant, Done<std::vector<NamedStateInfo>> done) {
  sessions_.RunOnStoreWorker([this, tenant, done] {
    absl::StatusOr<std::vector<NamedStateListing>> mine =
        sessions_.store().ListNamedStates(tenant);
    sessions_.post()([this, tenant, done, mine = std::move(mine)] {
      if (!mine.ok()) return done(StoreError(mine.status()));
      std::vector<NamedStateInfo> infos = GlobalInfos();
      for (const NamedStateListing& listing : *mine) {
        Shared cached = Cached(tenant, listing.name);
        if (cached != nullptr && cached->info.digest == listing.digest) {
          infos.push_back(cached->info);
          continue;
        }
        NamedStateInfo info;
        info.name = listing.name;
        info.digest = listing.digest;
        info.state_bytes = listing.bytes;
        infos.push_back(std::move(info));
      }
      done(std::move(infos));
    });
  });
}

void NamedStates::Delete(const std::string& tenant, const std::string& name, Done<bool> done) {
  if (global_.contains(name)) {
    return done(absl::PermissionDeniedError(
        absl::StrCat("\"", name, "\" is the server's own named state: it is read-only")));
  }
  sessions_.RunOnStoreWorker([this, tenant, name, done] {
    absl::Status deleted = sessions_.store().DeleteNamedState({tenant, name});
    sessions_.post()([this, tenant, name, done, deleted] {
      if (deleted.ok() || absl::IsNotFound(deleted)) Forget(tenant, name);
      if (absl::IsNotFound(deleted)) return done(NotFound("name", name));
      if (!deleted.ok()) return done(StoreError(deleted));
      done(true);
    });
  });
}

void NamedStates::Remember(Shared state) {
  const std::string key = CacheKey(state->tenant, state->info.name);
  Forget(state->tenant, state->info.name);
  cache_bytes_ += state->info.state_bytes;
  cache_[key] = Entry{std::move(state), ++uses_};
  // Past the bound the least recently used go (never the one just added:
  // turns starting from it hold their own reference meanwhile anyway).
  while (cache_bytes_ > options_.named_state_cache_bytes && cache_.size() > 1) {
    auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const auto& a, const auto& b) {
      return a.second.last_used < b.second.last_used;
    });
    cache_bytes_ -= oldest->second.state->info.state_bytes;
    cache_.erase(oldest);
  }
  UpdateGauges();
}

void NamedStates::Forget(const std::string& tenant, const std::string& name) {
  auto it = cache_.find(CacheKey(tenant, name));
  if (it == cache_.end()) return;
  cache_bytes_ -= it->second.state->info.state_bytes;
  cache_.erase(it);
  UpdateGauges();
}

NamedStates::Shared NamedStates::Cached(const std::string& tenant, const std::string& name) {
  auto it = cache_.find(CacheKey(tenant, name));
  if (it == cache_.end()) return nullptr;
  it->second.last_used = ++uses_;
  return it->second.state;
}

void NamedStates::UpdateGauges() {
  metrics_->global_named_states().Set(static_cast<double>(global_.size()));
  metrics_->tenant_named_states().Set(static_cast<double>(cache_.size()));
}

}  // namespace linserve
