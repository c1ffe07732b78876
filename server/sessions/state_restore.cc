#include "server/sessions/state_restore.h"

#include "absl/strings/str_cat.h"
#include "engine/model/language_model.h"
#include "engine/model/state.h"

namespace linserve {

absl::StatusOr<State> RestoreState(const SessionRecord& record, const LanguageModel& model) {
  absl::StatusOr<State> state = model.DeserializeState(record.payload);
  if (!state.ok()) {
    return absl::DataLossError(
        absl::StrCat("the state does not fit the model: ", state.status().message()));
  }
  if (state->positions[0] != record.position) {
    return absl::DataLossError(absl::StrCat("the header says position ", record.position,
                                            " but the state is at ", state->positions[0]));
  }
  if (record.pending_token >= model.vocab_size()) {
    return absl::DataLossError(absl::StrCat("the pending token ", record.pending_token,
                                            " is outside the vocabulary of ",
                                            model.vocab_size()));
  }
  return state;
}

}  // namespace linserve
