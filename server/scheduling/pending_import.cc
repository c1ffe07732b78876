#include "server/scheduling/pending_import.h"

#include <utility>

namespace linserve {

void PendingImport::SetState(absl::StatusOr<State> state) {
  std::function<void()> ready;
  {
    absl::MutexLock lock(&mu_);
    state_ = std::move(state);
    ready = TakeReady();
  }
  if (ready) ready();
}

void PendingImport::SetWritten(absl::Status written) {
  std::function<void()> ready;
  {
    absl::MutexLock lock(&mu_);
    written_ = std::move(written);
    ready = TakeReady();
  }
  if (ready) ready();
}

void PendingImport::WhenBoth(Then then) {
  std::function<void()> ready;
  {
    absl::MutexLock lock(&mu_);
    then_ = std::move(then);
    ready = TakeReady();
  }
  if (ready) ready();
}

std::function<void()> PendingImport::TakeReady() {
  if (!state_ || !written_ || !then_) return nullptr;
  // Moved out, so that a second call finds nothing to run.
  return [then = std::exchange(then_, nullptr), state = *std::exchange(state_, std::nullopt),
          written = *std::exchange(written_, std::nullopt)]() mutable {
    then(std::move(state), std::move(written));
  };
}

}  // namespace linserve
