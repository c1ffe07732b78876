#ifndef LINSERVE_SERVER_SESSION_COMMANDS_H_
#define LINSERVE_SERVER_SESSION_COMMANDS_H_

// The session RPCs that run no model step: create an empty session, get,
// list, delete, fork, export and import. Engine thread only (the scheduler
// posts them there); each answers through `done`, maybe later from a task the
// checkpoint writer posts back. A CreateSession with a prompt is a turn
// (server/scheduling/turn_runner.h).

#include <cstdint>
#include <memory>
#include <string>

#include "server/scheduling/scheduler.h"
#include "server/scheduling/session_manager.h"
#include "server/store/state_file.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h (LibTorch stays out of this header)

class SessionCommands {
 public:
  template <typename T>
  using Done = Scheduler::Done<T>;

  SessionCommands(const LanguageModel& model, SessionManager& sessions)
      : model_(model), sessions_(sessions) {}

  void CreateEmpty(const std::string& tenant, const Done<SessionInfo>& done);
  // A new session holding `state` (a named state's copy) and its pending token.
  // `origin`: the named state's content digest.
  void CreateFrom(const std::string& tenant, State state, int64_t pending_token,
                  std::string origin, const Done<SessionInfo>& done);
  void Get(const std::string& tenant, const std::string& id, const Done<SessionInfo>& done);
  void GetChat(const std::string& tenant, const std::string& id,
               const Done<SessionChatInfo>& done);
  void List(const std::string& tenant, int32_t page_size, const std::string& page_token,
            const Done<SessionPage>& done);
  void Delete(const std::string& tenant, const std::string& id, const Done<bool>& done);
  void Fork(const std::string& tenant, const std::string& id, const Done<SessionInfo>& done);
  // The session's state file, as the store holds it.
  void Export(const std::string& tenant, const std::string& id, const Done<std::string>& done);
  // `import`'s record has passed DecodeStateFileOfModel and CheckRestorable,
  // and its state is being built on another thread; the session gets a new
  // id, and answers once it is durable and its state built.
  void Import(const std::string& tenant, std::shared_ptr<PendingImport> import,
              const Done<SessionInfo>& done);

 private:
  const LanguageModel& model_;
  SessionManager& sessions_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_COMMANDS_H_
