#ifndef LINSERVE_SERVER_SESSION_ID_H_
#define LINSERVE_SERVER_SESSION_ID_H_

#include <string>

#include "absl/status/statusor.h"

namespace linserve {

// A fresh session id: 128 bits from the operating system's CSPRNG (OpenSSL
// RAND_bytes), as 32 lowercase hex digits. UNAVAILABLE if the CSPRNG fails.
absl::StatusOr<std::string> NewSessionId();

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_ID_H_
