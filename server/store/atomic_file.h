#ifndef LINSERVE_SERVER_ATOMIC_FILE_H_
#define LINSERVE_SERVER_ATOMIC_FILE_H_

// Whole-file writes that a crash cannot tear: afterwards `path` holds either
// its old bytes or all the new ones.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace linserve {

// Writes a temporary file beside `path` (named `path` + kTempSuffix + a
// unique tail), fsyncs it, renames it over `path`, and fsyncs the directory.
// On any error the temporary file is removed, `path` is untouched, and the
// status (with the errno's code and text) says which step failed.
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// The whole file; NOT_FOUND when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Removes the temporaries a crashed writer left in `dir`; returns how many.
absl::StatusOr<int> RemoveStaleTempFiles(const std::string& dir);

inline constexpr char kTempSuffix[] = ".tmp-";

}  // namespace linserve

#endif  // LINSERVE_SERVER_ATOMIC_FILE_H_
