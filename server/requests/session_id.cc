#include "server/requests/session_id.h"

#include <openssl/rand.h>

#include <cstdint>

namespace linserve {

absl::StatusOr<std::string> NewSessionId() {
  unsigned char random[16];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::UnavailableError("session id: the CSPRNG failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  id.reserve(2 * sizeof(random));
  for (unsigned char byte : random) {
    id.push_back(kHex[byte >> 4]);
    id.push_back(kHex[byte & 0xf]);
  }
  return id;
}

}  // namespace linserve
