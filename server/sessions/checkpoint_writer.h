#ifndef LINSERVE_SERVER_CHECKPOINT_WRITER_H_
#define LINSERVE_SERVER_CHECKPOINT_WRITER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/common/metrics.h"
#include "server/sessions/store_worker.h"
#include "server/store/state_file.h"
#include "server/store/state_store.h"

namespace linserve {

// Writes sessions' state files to the store on its own thread, so that the
// engine thread never waits for a disk (an fsync takes milliseconds). Puts and
// deletes run in the order they were queued, so a session's latest write
// always lands last and a delete is never undone by an older put. Its thread
// is a StoreWorker of its own, apart from the engine's reads.
// Thread-safe.
class CheckpointWriter {
 public:
  // Called on the writer thread once the operation is durable (or failed).
  using Done = std::function<void(absl::Status)>;

  CheckpointWriter(StateStore* store, Metrics* metrics);
  // Finishes everything queued, then stops.
  ~CheckpointWriter();

  // Encodes `record` (checksumming it off the engine thread) and stores it
  // under `fence` (see WriteFence; a store one server owns ignores it).
  void Put(StoredSessionKey key, SessionRecord record, Done done);
  void Put(StoredSessionKey key, SessionRecord record, WriteFence fence, Done done);
  // The same with `payload`, unless null, as the file's payload in place of
  // the record's own: bytes another thread may read at the same time.
  void Put(StoredSessionKey key, SessionRecord header, std::shared_ptr<const std::string> payload,
           WriteFence fence, Done done);
  // StateStore::PutFork, in the same order as the puts and deletes.
  void PutFork(StoredSessionKey fork, StoredSessionKey source, SessionRecord header, Done done);
  void Delete(StoredSessionKey key, Done done);
  // Returns once everything queued before the call is done.
  void Flush();

 private:
  StateStore* const store_;
  Metrics* const metrics_;
  // Last: destroyed first, running what is queued while the store exists.
  StoreWorker worker_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_CHECKPOINT_WRITER_H_
