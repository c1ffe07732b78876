#include "server/state_store.h"

#include <string_view>

#include "engine/sha256.h"

namespace linserve {

std::string StoredSessionName(const StoredSessionKey& key) {
  return Sha256Hex({std::string_view(key.tenant), std::string_view("\0", 1),
                    std::string_view(key.session_id)});
}

}  // namespace linserve
