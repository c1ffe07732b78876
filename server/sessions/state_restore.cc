#include "server/sessions/state_restore.h"

#include "absl/strings/str_cat.h"
#include "engine/model/language_model.h"
#include "engine/model/state.h"

namespace linserve {

namespace {

// The checks after the tensors' own: `position` is where the state stands.
absl::Status CheckHeaderAgainstState(const SessionRecord& record, int64_t position,
                                     const LanguageModel& model) {
  if (position != record.position) {
    return absl::DataLossError(absl::StrCat("the header says position ", record.position,
                                            " but the state is at ", position));
  }
  if (record.pending_token >= model.vocab_size()) {
    return absl::DataLossError(absl::StrCat("the pending token ", record.pending_token,
                                            " is outside the vocabulary of ",
                                            model.vocab_size()));
  }
  return absl::OkStatus();
}

absl::Status DoesNotFit(const absl::Status& status) {
  return absl::DataLossError(absl::StrCat("the state does not fit the model: ", status.message()));
}

}  // namespace

absl::StatusOr<State> RestoreState(const SessionRecord& record, const LanguageModel& model) {
  absl::StatusOr<State> state = model.DeserializeState(record.payload);
  if (!state.ok()) return DoesNotFit(state.status());
  if (absl::Status header = CheckHeaderAgainstState(record, state->positions[0], model);
      !header.ok()) {
    return header;
  }
  return state;
}

absl::Status CheckRestorable(const SessionRecord& record, const LanguageModel& model) {
  absl::StatusOr<int64_t> position = model.CheckSerializedState(record.payload);
  if (!position.ok()) return DoesNotFit(position.status());
  return CheckHeaderAgainstState(record, *position, model);
}

}  // namespace linserve
