#ifndef LINSERVE_SERVER_STATE_RESTORE_H_
#define LINSERVE_SERVER_STATE_RESTORE_H_

// A decoded state file (server/store/state_file.h) turned back into an engine State:
// the one check every way into a session runs, from the store and from
// ImportSession alike, so that neither trusts what the other refuses.

#include "absl/status/statusor.h"
#include "server/store/state_file.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h; kept out of this header (LibTorch)
struct State;

// The record's payload as a State of `model`. DATA_LOSS when the tensors do
// not fit the model (names, dtypes, shapes), hold NaN or Inf, stand at
// another position than the header says, or the pending token is outside the
// vocabulary. The file's own checks (DecodeStateFileOfModel: checksum,
// format version, model fingerprint) come first; this is what they cannot see.
absl::StatusOr<State> RestoreState(const SessionRecord& record, const LanguageModel& model);

// RestoreState's checks alone, the tensors read where they lie in the
// payload: OK exactly when RestoreState would succeed, memory allowing.
// ImportSession checks first, then writes the file while it builds the state.
absl::Status CheckRestorable(const SessionRecord& record, const LanguageModel& model);

}  // namespace linserve

#endif  // LINSERVE_SERVER_STATE_RESTORE_H_
