#ifndef LINSERVE_SERVER_STORE_WORKER_H_
#define LINSERVE_SERVER_STORE_WORKER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace linserve {

// Runs store calls on a thread of its own, in the order they were queued.
// Two of them serve the engine: one does its reads and lease calls, the
// checkpoint writer's does its puts and deletes (checkpoint_writer.h). With a
// store several servers share, a read is a network round trip (Redis) that
// may wait behind another server's load, a large write or a stalled
// connection: the engine thread queues it here and learns the outcome from a
// task it is posted, as it learns of new requests, so decoding never waits
// for the store. FIFO order keeps a session's lease calls in the order the
// engine made them (a release before the next turn's take). Thread-safe.
class StoreWorker {
 public:
  StoreWorker();
  // Runs everything queued, then stops.
  ~StoreWorker();

  void Run(std::function<void()> job);
  // Returns once every job queued before the call has run.
  void Flush();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_ ABSL_GUARDED_BY(mu_) = 0;  // jobs ever queued
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;    // jobs ever finished
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STORE_WORKER_H_
