#include "server/scheduling/session_commands.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/model/language_model.h"
#include "server/scheduling/pending_import.h"

namespace linserve {
namespace {

constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;

// A page token names the last session of the previous page by its place in
// the listing order, (created_unix_ms, id), so deleting it loses nothing.
std::string PageToken(const Session& last) {
  return absl::StrCat(last.created_unix_ms, ".", last.id);
}

absl::StatusOr<std::pair<int64_t, std::string>> ParsePageToken(const std::string& token) {
  std::pair<std::string, std::string> parts = absl::StrSplit(token, absl::MaxSplits('.', 1));
  int64_t created = 0;
  if (!absl::SimpleAtoi(parts.first, &created) || parts.second.empty()) {
    return absl::InvalidArgumentError(
        "page_token is malformed: pass the next_page_token of the previous page");
  }
  return std::make_pair(created, parts.second);
}

}  // namespace

void SessionCommands::CreateEmpty(const std::string& tenant, const Done<SessionInfo>& done) {
  absl::StatusOr<Session*> session = sessions_.AddResident(tenant, model_.NewState());
  if (!session.ok()) return done(session.status());
  sessions_.CheckpointThenAnswer(**session, done, "the new session");
}

void SessionCommands::CreateFrom(const std::string& tenant, State state, int64_t pending_token,
                                 std::string origin, const Done<SessionInfo>& done) {
  const int64_t position = state.positions[0];
  absl::StatusOr<Session*> session = sessions_.AddResident(tenant, std::move(state));
  if (!session.ok()) return done(session.status());
  (*session)->position = position;
  (*session)->pending_token = pending_token;
  (*session)->origin = std::move(origin);
  (*session)->tokens_known = false;  // a named state's tokens are not known
  sessions_.CheckpointThenAnswer(**session, done, "the new session");
}

void SessionCommands::Get(const std::string& tenant, const std::string& id,
                          const Done<SessionInfo>& done) {
  sessions_.Prepare(tenant, id, SessionManager::Use::kRead,
                    [this, done](absl::StatusOr<Session*> session, TurnLease) {
                      if (!session.ok()) return done(session.status());
                      done(sessions_.InfoOf(**session));
                    });
}

void SessionCommands::GetChat(const std::string& tenant, const std::string& id,
                              const Done<SessionChatInfo>& done) {
  sessions_.Prepare(tenant, id, SessionManager::Use::kRead,
                    [done](absl::StatusOr<Session*> session, TurnLease) {
                      if (!session.ok()) return done(session.status());
                      done(SessionChatInfo{(*session)->position, (*session)->chat});
                    });
}

void SessionCommands::List(const std::string& tenant, int32_t page_size,
                           const std::string& page_token, const Done<SessionPage>& done) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "page_size = ", page_size, " is outside [0, ", kMaxPageSize, "] (0 means 100)")));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  std::pair<int64_t, std::string> after{INT64_MIN, ""};
  if (!page_token.empty()) {
    absl::StatusOr<std::pair<int64_t, std::string>> parsed = ParsePageToken(page_token);
    if (!parsed.ok()) return done(parsed.status());
    after = *parsed;
  }
  const std::vector<const Session*> all = sessions_.ListOf(tenant);
  auto first = std::upper_bound(all.begin(), all.end(), after,
                                [](const std::pair<int64_t, std::string>& key, const Session* s) {
                                  return std::tie(key.first, key.second) <
                                         std::tie(s->created_unix_ms, s->id);
                                });
  SessionPage page;
  for (auto it = first; it != all.end() && page.sessions.size() < static_cast<size_t>(page_size);
       ++it) {
    page.sessions.push_back(sessions_.InfoOf(**it));
    if (page.sessions.size() == static_cast<size_t>(page_size) && std::next(it) != all.end()) {
      page.next_page_token = PageToken(**it);
    }
  }
  done(std::move(page));
}

void SessionCommands::Delete(const std::string& tenant, const std::string& id,
                             const Done<bool>& done) {
  // Not while a turn runs on it, here or (its lease) on another server. The
  // delete removes the lease with the state.
  sessions_.Prepare(tenant, id, SessionManager::Use::kDelete,
                    [this, id, done](absl::StatusOr<Session*> session, TurnLease) {
                      if (!session.ok()) return done(session.status());
                      sessions_.Forget(id, [done](absl::Status deleted) {
                        if (deleted.ok()) return done(true);
                        done(absl::UnavailableError(absl::StrCat(
                            "deleting the stored state failed: ", deleted.message())));
                      });
                    });
}

void SessionCommands::Fork(const std::string& tenant, const std::string& id,
                           const Done<SessionInfo>& done) {
  sessions_.Prepare(
      tenant, id, SessionManager::Use::kResident,
      [this, tenant, done](absl::StatusOr<Session*> source, TurnLease) {
        if (!source.ok()) return done(source.status());
        // A session's state is never written (a turn works on its own copy
        // and installs a new state at its end), so the fork holds the
        // source's tensors and KV blocks as they are: it copies nothing
        // until one of the two moves on.
        absl::StatusOr<Session*> child = sessions_.AddResident(tenant, State(*(*source)->state));
        if (!child.ok()) return done(child.status());
        Session& fork = **child;
        fork.position = (*source)->position;
        fork.pending_token = (*source)->pending_token;
        fork.origin = (*source)->origin;
        fork.rng = (*source)->rng;
        // The same tokens, and the kept states (never changed, so shared):
        // the fork's KV cache begins with the same entries.
        fork.tokens = (*source)->tokens;
        fork.tokens_known = (*source)->tokens_known;
        fork.kept = (*source)->kept;
        fork.chat = (*source)->chat;
        sessions_.CheckpointForkThenAnswer(fork, **source, done);
      });
}

void SessionCommands::Export(const std::string& tenant, const std::string& id,
                             const Done<std::string>& done) {
  sessions_.Prepare(tenant, id, SessionManager::Use::kRead,
                    [this, done](absl::StatusOr<Session*> session, TurnLease) {
                      if (!session.ok()) return done(session.status());
                      if ((*session)->state) {
                        return done(EncodeStateFile(sessions_.RecordOf(**session)));
                      }
                      // Spilled: the store holds exactly the last finished turn.
                      sessions_.RunOnStoreWorker([this, key = (*session)->key(), done] {
                        done(sessions_.store().Get(key));
                      });
                    });
}

void SessionCommands::Import(const std::string& tenant, std::shared_ptr<PendingImport> import,
                             const Done<SessionInfo>& done) {
  const SessionRecord& record = import->record();
  absl::StatusOr<Session*> session = sessions_.AddPending(tenant, record.position);
  if (!session.ok()) return done(session.status());
  Session& imported = **session;
  imported.position = record.position;
  imported.pending_token = record.pending_token;
  imported.origin = record.origin;
  imported.rng = {record.rng_seed, record.rng_draws};
  // Those the file holds (a version 1 file's are not known).
  imported.tokens = record.tokens;
  imported.tokens_known = static_cast<int64_t>(record.tokens.size()) == record.position;
  imported.chat = record.chat;
  sessions_.CheckpointImported(imported, std::move(import), done);
}

}  // namespace linserve
