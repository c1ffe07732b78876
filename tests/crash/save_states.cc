#include "tests/crash/save_states.h"

#include <random>

#include "server/store/state_file.h"

namespace linserve {

std::string SaveStateFile(char which) {
  SessionRecord record;
  record.model_fingerprint = std::string(64, 'f');
  record.tenant = "tenant";
  record.session_id = "0123456789abcdef0123456789abcdef";
  record.position = which == 'A' ? 1000 : 2000;
  std::mt19937_64 random(static_cast<uint64_t>(which));
  record.payload.resize(which == 'A' ? 256 << 10 : 320 << 10);
  for (char& byte : record.payload) byte = static_cast<char>(random());
  return EncodeStateFile(record);
}

StoredSessionKey SaveStateKey() { return {"tenant", "0123456789abcdef0123456789abcdef"}; }

}  // namespace linserve
