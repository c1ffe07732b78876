#ifndef LINSERVE_SERVER_PENDING_IMPORT_H_
#define LINSERVE_SERVER_PENDING_IMPORT_H_

// An ImportSession between its checks and its answer. Once the file is
// known to restore (CheckRestorable), two things run at once: its durable
// write, on the checkpoint writer, and the build of its state, on the
// caller's thread; the import waits for the longer, the write (bench/RESULTS.md,
// "ImportSession: checked in place"). Whichever finishes second hands both
// outcomes on. Thread-safe.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/model/state.h"
#include "server/store/state_file.h"

namespace linserve {

class PendingImport {
 public:
  using Then = std::function<void(absl::StatusOr<State> state, absl::Status written)>;

  explicit PendingImport(SessionRecord record) : record_(std::move(record)) {}

  // The imported file, read by both threads and changed by neither.
  const SessionRecord& record() const { return record_; }
  // Its payload, kept alive as long as the returned pointer (the writer's
  // encoding reads it after this object's last other user is gone).
  static std::shared_ptr<const std::string> Payload(std::shared_ptr<const PendingImport> import) {
    const std::string* payload = &import->record_.payload;
    return {std::move(import), payload};
  }

  // The state built from the payload (or why it could not be).
  void SetState(absl::StatusOr<State> state);
  // The durable write's outcome.
  void SetWritten(absl::Status written);
  // Runs `then` once both are in, on the thread that gave the second (at once
  // when both are in already). At most once.
  void WhenBoth(Then then);

 private:
  // `then_` with both outcomes, once all three are in; null otherwise.
  std::function<void()> TakeReady() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SessionRecord record_;
  absl::Mutex mu_;
  std::optional<absl::StatusOr<State>> state_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> written_ ABSL_GUARDED_BY(mu_);
  Then then_ ABSL_GUARDED_BY(mu_);
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_PENDING_IMPORT_H_
