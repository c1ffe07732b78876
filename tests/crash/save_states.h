#ifndef LINSERVE_TESTS_CRASH_SAVE_STATES_H_
#define LINSERVE_TESTS_CRASH_SAVE_STATES_H_

// The two state files the kill-during-save test alternates between, known to
// the saving helper and the checking test alike.

#include <string>

#include "server/store/state_store.h"

namespace linserve {

// State file A or B ('A' / 'B'): sound state files of different sizes
// (about 256 KiB and 320 KiB, like a small model's) with different bytes
// throughout, so that any mix of the two is neither.
std::string SaveStateFile(char which);

// The session both are saved as.
StoredSessionKey SaveStateKey();

}  // namespace linserve

#endif  // LINSERVE_TESTS_CRASH_SAVE_STATES_H_
