#ifndef LINSERVE_SERVER_STATE_FILE_H_
#define LINSERVE_SERVER_STATE_FILE_H_

// The state file: one session as bytes, the same on
// disk, in Redis and in Export/ImportSession.
//
//   offset  size  field
//   0       8     magic "LNSVSTAT"
//   8       4     format version (uint32 LE), 1
//   12      4     header length H (uint32 LE), at most kMaxStateHeaderBytes
//   16      H     header: JSON object {model_fingerprint, tenant, session_id,
//                 position, pending_token, rng_seed, rng_draws,
//                 created_unix_ms, last_used_unix_ms[, source][, origin]}
//   16+H    8     payload length P (uint64 LE)
//   24+H    P     payload: the engine's SerializeState bytes (a safetensors
//                 tensor table and the tensors)
//   24+H+P  8     token count N (uint64 LE): 0, or the position       [version 2]
//   32+H+P  4N    the tokens the state consumed, in order (int32 LE)  [version 2]
//   ...     8     chat context length C (uint64 LE)                   [version 3]
//   ...     C     SessionChat::context (the HTTP layer's JSON)        [version 3]
//   ...     8     chat reply length R (uint64 LE)                     [version 3]
//   ...     R     SessionChat::reply (UTF-8 text)                     [version 3]
//   ...     32    SHA-256 of every byte before it
//
// Version 2 added the tokens (a session's conversation turns compare them
// with what they are sent), version 3 an HTTP chat session's messages;
// version 1 and 2 files are still read, as files whose tokens (version 1)
// and chat messages are not known. Decoding checks sizes before it reads or allocates,
// then the checksum, and only then interprets the header: a corrupt file is
// DATA_LOSS, a sound file of another format version or model is
// FAILED_PRECONDITION. The payload's tensors are checked against the model by
// the engine (DeserializeState).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/base/sha256.h"

namespace linserve {

inline constexpr uint32_t kStateFormatVersion = 3;

// An HTTP chat session's messages, as its last turn left them: what the HTTP
// layer rendered that turn from (`context`, a JSON document only it reads)
// and the text the turn answered (`reply`). A chat turn that sends only its
// new messages renders them after these. Empty when the last turn was not
// such a chat turn.
struct SessionChat {
  std::string context;
  std::string reply;

  bool empty() const { return context.empty() && reply.empty(); }
};
inline constexpr int64_t kMaxStateHeaderBytes = 64 * 1024;

struct SessionRecord {
  std::string model_fingerprint;  // LanguageModel::Fingerprint(), 64 hex digits
  std::string tenant;             // owner; empty when auth is off
  std::string session_id;
  int64_t position = 0;           // tokens consumed by the state
  int64_t pending_token = -1;     // sampled but not yet fed to the state; -1: none
  uint64_t rng_seed = 0;          // the session's sampler: seed and draws so far
  uint64_t rng_draws = 0;
  int64_t created_unix_ms = 0;
  int64_t last_used_unix_ms = 0;
  std::string payload;            // SerializeState bytes
  // The tokens the state consumed (position of them), when known; empty
  // otherwise (a named state's, a version 1 file's).
  std::vector<int32_t> tokens;
  SessionChat chat;  // empty in files before version 3
  // A named state's: where it came from ("prompt", "state_file",
  // "rwkv_peft", "ai00"); empty (and not written) for a session.
  std::string source;
  // A session made from a named state: that state's content digest (its
  // first turn's prefix-cache scope); empty (and not written) otherwise.
  std::string origin;
};

std::string EncodeStateFile(const SessionRecord& record);
// The same with `payload` in place of the record's own (which is ignored).
std::string EncodeStateFile(const SessionRecord& header, std::string_view payload);

// `max_bytes` bounds the whole file (the server's max state size).
absl::StatusOr<SessionRecord> DecodeStateFile(std::string_view bytes, int64_t max_bytes);

// DecodeStateFile, then FAILED_PRECONDITION unless the file is of the model
// with `fingerprint`.
absl::StatusOr<SessionRecord> DecodeStateFileOfModel(std::string_view bytes, int64_t max_bytes,
                                                     std::string_view fingerprint);

// A state file that arrives in pieces (ImportSession's chunks): each piece
// is checksummed as it comes, so decoding after the last one does not read
// the whole file again. Decode makes exactly the checks of
// DecodeStateFileOfModel. Not thread-safe.
class StateFileAssembler {
 public:
  // `expected_bytes`: room to reserve, so that the pieces are copied once.
  explicit StateFileAssembler(size_t expected_bytes);

  void Append(std::string_view piece);
  size_t size() const { return bytes_.size(); }

  // DecodeStateFileOfModel of everything appended. Once.
  absl::StatusOr<SessionRecord> Decode(int64_t max_bytes, std::string_view fingerprint);

 private:
  std::string bytes_;
  Sha256 body_checksum_;  // of bytes_[0, hashed_)
  size_t hashed_ = 0;     // always all but the last 32 bytes: they may be the checksum
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STATE_FILE_H_
